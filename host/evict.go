package host

import (
	"github.com/edgellm/edgellm/abi"
)

// EvictSetter is implemented by sessions whose KV window can merge the
// positions it evicts instead of dropping them (the native engine, issue
// #29): mode "drop" (the default) masks an evicted position out; "merge"
// folds its K and V into the next visible position with a decay weight
// (F16 or F32 KV only). It applies to windows set by SetWindow,
// SetLayerWindows or a policy (ABI 1.7 Decision.kv_evict), and may change
// between steps. EvictMode is the mode in force.
type EvictSetter interface {
	SetEvictMode(mode string) error
	EvictMode() string
}

var evictNames = map[int32]string{abi.EvictDrop: "drop", abi.EvictMerge: "merge"}

// fillEvict writes the ABI 1.7 eviction mode when the session has one.
func (a *Adapter) fillEvict(s *abi.Sensors) {
	es, ok := a.sess.(EvictSetter)
	if !ok {
		return
	}
	s.KVEvict = abi.EvictDrop
	if es.EvictMode() == "merge" {
		s.KVEvict = abi.EvictMerge
	}
	s.Present |= abi.PresentEvict
}
