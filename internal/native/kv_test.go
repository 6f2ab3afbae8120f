package native

import (
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestKVBytesPerToken: Q8_0 is 8.5 bits and Q4_0 4.5 bits per value against
// F16's 16 (Q4_0 ≤ 0.29 × F16).
func TestKVBytesPerToken(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c := e.Config()
	per := map[engine.KVType]int64{}
	for _, kv := range []engine.KVType{engine.KVF32, engine.KVF16, engine.KVQ8_0, engine.KVQ4_0} {
		s, err := e.newSession(engine.SessionConfig{NCtx: 128, KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		per[kv] = s.Stats().KVBytesToken
		t.Logf("%s: %d KV bytes/token, arena %d bytes", kv, per[kv], s.Stats().KVBytes)
		s.Close()
	}
	values := int64(2 * c.NLayer * c.NEmbdKV())
	if per[engine.KVF16] != 2*values || per[engine.KVF32] != 4*values {
		t.Fatalf("f16 %d f32 %d bytes/token for %d values", per[engine.KVF16], per[engine.KVF32], values)
	}
	if r := float64(per[engine.KVQ4_0]) / float64(per[engine.KVF16]); r > 0.29 || r != 4.5/16 {
		t.Fatalf("q4_0/f16 = %.4f, want 4.5/16", r)
	}
	if r := float64(per[engine.KVQ8_0]) / float64(per[engine.KVF16]); r != 8.5/16 {
		t.Fatalf("q8_0/f16 = %.4f, want 8.5/16", r)
	}
}
