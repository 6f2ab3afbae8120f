package policy

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
)

// TestClampKVEvict: ABI 1.7 kv_evict outside 0–2 becomes 0 (leave) and is
// reported as a clamp, not as an invalid decision.
func TestClampKVEvict(t *testing.T) {
	l := Limits{NTiers: 1, NLayers: 16, MaxWindow: 64, MaxThreads: 2, MaxCadence: 8}
	cur := abi.Decision{}
	for _, tc := range []struct {
		in, want int32
		clamps   ClampSet
	}{
		{abi.EvictLeave, abi.EvictLeave, 0},
		{abi.EvictDrop, abi.EvictDrop, 0},
		{abi.EvictMerge, abi.EvictMerge, 0},
		{3, abi.EvictLeave, ClampKVEvict},
		{-1, abi.EvictLeave, ClampKVEvict},
	} {
		d := abi.Decision{KVEvict: tc.in}
		if why := invalidReason(&d); why != "" {
			t.Errorf("kv_evict %d: invalid (%s)", tc.in, why)
		}
		if c := l.clamp(&d, &cur, 0); c != tc.clamps || d.KVEvict != tc.want {
			t.Errorf("kv_evict %d: %d clamps %v, want %d %v", tc.in, d.KVEvict, c.Names(), tc.want, tc.clamps.Names())
		}
	}
	if n := ClampKVEvict.Names(); len(n) != 1 || n[0] != "kv_evict" {
		t.Errorf("ClampKVEvict.Names() = %v", n)
	}
}

// TestApplyKVEvict: 1 and 2 are taken by an engine that can evict by
// merging, 0 keeps the mode in force, and an engine that cannot keeps it.
func TestApplyKVEvict(t *testing.T) {
	cur := abi.Decision{KVEvict: abi.EvictMerge}
	for _, tc := range []struct {
		in   int32
		can  bool
		want int32
	}{
		{abi.EvictLeave, true, abi.EvictMerge},
		{abi.EvictDrop, true, abi.EvictDrop},
		{abi.EvictMerge, true, abi.EvictMerge},
		{abi.EvictDrop, false, abi.EvictMerge},
	} {
		got := Apply(cur, abi.Decision{KVEvict: tc.in}, Abilities{Evict: tc.can})
		if got.KVEvict != tc.want {
			t.Errorf("kv_evict %d (can %v): %d, want %d", tc.in, tc.can, got.KVEvict, tc.want)
		}
	}
}
