package host

// EvictSetter is implemented by sessions whose KV window can merge the
// positions it evicts instead of dropping them (the native engine, issue
// #29): mode "drop" (the default) masks an evicted position out; "merge"
// folds its K and V into the next visible position with a decay weight
// (F16 or F32 KV only). It applies to windows set by SetWindow,
// SetLayerWindows or a policy, and may change between steps.
type EvictSetter interface {
	SetEvictMode(mode string) error
}
