package kernels

import (
	"testing"

	"github.com/edgellm/edgellm/host/engine"
)

// A 128-wide KV row (e.g. one head of dim 128): Q8_0 is 8.5 and Q4_0 4.5 bits
// per value, so Q4_0 is 0.28 × F16.
func TestRowBytes(t *testing.T) {
	tests := []struct {
		t    engine.KVType
		n    int64
		want int64
	}{
		{engine.KVF16, 128, 256}, {engine.KVF32, 128, 512}, {engine.KVQ8_0, 128, 136}, {engine.KVQ4_0, 128, 72},
	}
	for _, tt := range tests {
		if got, err := RowBytes(tt.t, tt.n); err != nil || got != tt.want {
			t.Errorf("RowBytes(%s, %d) = %d, %v; want %d", tt.t, tt.n, got, err, tt.want)
		}
	}
	if _, err := RowBytes(engine.KVQ4_0, 8); err == nil {
		t.Error("Q4_0 row of 8: want error (not a multiple of 32)")
	}
	if _, err := RowBytes("q3", 128); err == nil {
		t.Error("unknown type: want error")
	}
}

// Every KV type maps to a ggml type whose name is the KV type's, and back.
func TestKVGGMLType(t *testing.T) {
	for _, kv := range []engine.KVType{engine.KVF16, engine.KVF32, engine.KVQ8_0, engine.KVQ4_0} {
		g, _, err := KVGGMLType(kv)
		if err != nil || g.String() != string(kv) || GGMLKVType(g) != kv {
			t.Errorf("%s: ggml %s (%v), back %q", kv, g, err, GGMLKVType(g))
		}
	}
	if g, _, err := KVGGMLType(""); err != nil || g != GGMLTypeF16 {
		t.Errorf(`"": %s, %v; want f16`, g, err)
	}
	if GGMLKVType(GGMLTypeQ5_0) != "" {
		t.Error("q5_0 is no KV type")
	}
}
