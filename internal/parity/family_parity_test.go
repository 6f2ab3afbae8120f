package parity

import (
	"fmt"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/synthtest"
)

// tinyFamilies are the SYNTHETIC tiny models of each family.
var tinyFamilies = synthtest.TinyFamilies

// familyModel is the SYNTHETIC model of shape name, written once per test
// binary (synthtest.Cache.Named).
func familyModel(t testing.TB, name string, typ gguf.Type) string {
	t.Helper()
	return synths.Named(t, name, typ)
}

// TestParityFamiliesRepacked: both engines repacked (the interleaved Q4_0
// kernels) agree on every family.
func TestParityFamiliesRepacked(t *testing.T) {
	requireRepack(t)
	for _, name := range tinyFamilies {
		t.Run(name, func(t *testing.T) {
			r, err := Parity(familyModel(t, name, gguf.Q4_0), Options{N: 64, Threads: 1, KVType: engine.KVF16, Attention: engine.AttentionFlash, Repack: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Top1Agreement != 1 || r.MaxAbsLogitDiff > parityBound {
				t.Fatalf("repacked: top1 %.4f max|Δlogit| %.3g", r.Top1Agreement, r.MaxAbsLogitDiff)
			}
		})
	}
}

// TestParityFamilies: on a SYNTHETIC tiny model of every family, the native
// engine's greedy choice equals llama.cpp's at each of 256 steps and the
// logits are identical (parityBound), with flash and classic
// attention and F16, Q8_0 and Q4_0 KV (quantized KV against llama.cpp with
// the same KV type, which needs flash attention). Both engines run the same
// ggml kernels in one process: only a different graph (a missed family
// feature) or a different summation order moves the logits. The sliding
// windows (48) and Phi-3's original context (256) are short enough that
// 256 steps cross them; gemma3-tiny-linear adds Gemma 3 4B's linear RoPE
// scaling of the global layers.
func TestParityFamilies(t *testing.T) {
	for _, name := range append(tinyFamilies, "gemma3-tiny-linear") {
		for _, tc := range []struct {
			kv    engine.KVType
			flash bool
		}{{engine.KVF16, true}, {engine.KVF16, false}, {engine.KVQ8_0, true}, {engine.KVQ4_0, true}} {
			t.Run(fmt.Sprintf("%s/%s-flash=%v", name, tc.kv, tc.flash), func(t *testing.T) {
				path := familyModel(t, name, gguf.Q4_0)
				r, err := Parity(path, Options{N: 256, Threads: 1, KVType: tc.kv, Attention: att(tc.flash), SameKV: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("SYNTHETIC %s Q4_0 KV %s flash=%v: top1 %.4f max|Δlogit| %.3g KL mean %.3g", name, tc.kv, tc.flash,
					r.Top1Agreement, r.MaxAbsLogitDiff, r.KLMean)
				if r.Top1Agreement != 1 {
					t.Errorf("top-1 agreement %.4f, want 1", r.Top1Agreement)
				}
				if r.MaxAbsLogitDiff > parityBound {
					t.Errorf("max |Δlogit| %.3g > %g", r.MaxAbsLogitDiff, parityBound)
				}
			})
		}
	}
}

// TestParityPhi3ShortFactors: a Phi-3 session within the original context
// (200 + 1 ≤ 256; llama.cpp pads it to 256, still not above) uses
// rope_factors_short in both engines (TestParityFamilies' 257 uses the long).
func TestParityPhi3ShortFactors(t *testing.T) {
	r, err := Parity(familyModel(t, "phi3-tiny", gguf.Q4_0), Options{N: 200, Threads: 1, KVType: engine.KVF16, Attention: engine.AttentionFlash})
	if err != nil {
		t.Fatal(err)
	}
	if r.Top1Agreement != 1 || r.MaxAbsLogitDiff > parityBound {
		t.Fatalf("top1 %.4f max|Δlogit| %.3g", r.Top1Agreement, r.MaxAbsLogitDiff)
	}
}
