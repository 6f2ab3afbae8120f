package engine

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
)

// Every KV type has one wire value, named as the ABI names it, and back;
// unknown names and values map to "leave as is".
func TestKVTypeABI(t *testing.T) {
	seen := map[abi.KVType]bool{}
	for _, kv := range []KVType{KVF16, KVF32, KVQ8_0, KVQ4_0} {
		w := kv.ABI()
		if w == abi.KVUnknown || seen[w] || w.String() != string(kv) || KVTypeFromABI(w) != kv {
			t.Errorf("%s: wire %d (%q), back %q", kv, w, w.String(), KVTypeFromABI(w))
		}
		seen[w] = true
		if p, err := ParseKVType(string(kv)); err != nil || p != kv {
			t.Errorf("ParseKVType(%s) = %q, %v", kv, p, err)
		}
	}
	for w := abi.KVUnknown; w <= abi.KVQ4_0+1; w++ {
		if !seen[w] && KVTypeFromABI(w) != "" {
			t.Errorf("wire %d: %q, want \"\"", w, KVTypeFromABI(w))
		}
	}
	if KVType("").ABI() != abi.KVUnknown || KVType("q3").ABI() != abi.KVUnknown {
		t.Error("unknown names must be abi.KVUnknown")
	}
	if _, err := ParseKVType("q3"); err == nil {
		t.Error("ParseKVType(q3): want error")
	}
}
