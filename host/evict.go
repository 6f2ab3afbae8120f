package host

import (
	"fmt"

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

// applyEvict sets the session's eviction mode to d's (policy.Apply kept
// old's unless the session is an EvictSetter and d asked 1 or 2); a
// refusal (a quantized KV cannot merge) keeps old's value.
func (a *Adapter) applyEvict(step int, d *abi.Decision, old abi.Decision, changes []string) []string {
	if err := a.sess.(EvictSetter).SetEvictMode(evictNames[d.KVEvict]); err != nil {
		a.refused(step, "kv_evict", evictNames[d.KVEvict], err)
		d.KVEvict = old.KVEvict
		return changes
	}
	return append(changes, fmt.Sprintf("kv evict %s", evictNames[d.KVEvict]))
}

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
