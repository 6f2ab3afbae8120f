package native

import (
	"path/filepath"
	"strings"
	"testing"

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

// withKV is a copy of the model at src with kv added (or replaced).
func withKV(t *testing.T, src string, kv gguf.KV) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "edited.gguf")
	err := gguf.Rewrite(src, dst, func(kvs []gguf.KV) []gguf.KV {
		out := kvs[:0]
		for _, x := range kvs {
			if x.Key != kv.Key {
				out = append(out, x)
			}
		}
		return append(out, kv)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestFamilyKeysRefused: the loader refuses, by name, every metadata key
// that would change the math and that the native graph does not apply: an
// unknown key, a key of another family, a scaling it does not implement.
// The unedited files load.
func TestFamilyKeysRefused(t *testing.T) {
	qwen2 := familyModel(t, "qwen2-tiny", gguf.Q8_0)
	gemma2 := familyModel(t, "gemma2-tiny", gguf.Q8_0)
	for _, tc := range []struct {
		name, src string
		kv        gguf.KV
		want      string // "" = loads
	}{
		{"unknown key", qwen2, gguf.KV{Key: "qwen2.attention.frobnicate", Value: gguf.Uint32(1)}, "qwen2.attention.frobnicate"},
		{"logit scale", qwen2, gguf.KV{Key: "qwen2.logit_scale", Value: gguf.Float32(2)}, "qwen2.logit_scale"},
		{"another family's soft-cap", qwen2, gguf.KV{Key: "qwen2.attn_logit_softcapping", Value: gguf.Float32(50)}, "qwen2.attn_logit_softcapping"},
		{"yarn", qwen2, gguf.KV{Key: "qwen2.rope.scaling.type", Value: gguf.String("yarn")}, "yarn"},
		{"window pattern", gemma2, gguf.KV{Key: "gemma2.attention.sliding_window_pattern", Value: gguf.Uint32(3)}, "sliding_window_pattern"},
		{"experts", qwen2, gguf.KV{Key: "qwen2.expert_count", Value: gguf.Uint32(8)}, "expert_count"},
		{"zero experts is dense", qwen2, gguf.KV{Key: "qwen2.expert_count", Value: gguf.Uint32(0)}, ""},
		{"linear scaling reads", qwen2, gguf.KV{Key: "qwen2.rope.scaling.type", Value: gguf.String("linear")}, ""},
		{"finetuned is inert", gemma2, gguf.KV{Key: "gemma2.rope.scaling.finetuned", Value: gguf.Bool(true)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Load(withKV(t, tc.src, tc.kv), Options{NoVocab: true})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				e.Close()
				return
			}
			if err == nil {
				e.Close()
				t.Fatalf("loaded; want an error naming %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// TestFamilyConfig: what the loader reads from each tiny family file: the
// head dim from key_length, the sliding layers and their RoPE base, the
// soft-caps, LongRoPE.
func TestFamilyConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		check   func(c *Config) bool
		explain string
	}{
		{"qwen3-tiny", func(c *Config) bool { return c.HeadDim == 128 && c.NHead*c.HeadDim != c.NEmbd }, "head dim 128 from key_length"},
		{"gemma2-tiny", func(c *Config) bool {
			return c.NSWA == 48 && c.IsSWA(0) && !c.IsSWA(1) && c.IsSWA(2) && !c.IsSWA(3) && c.AttnSoftcap == 4 && c.FinalSoftcap == 3
		}, "window 48 on layers 0, 2; caps 4 and 3"},
		{"gemma3-tiny", func(c *Config) bool {
			b0, _ := c.ropeOf(0)
			b5, _ := c.ropeOf(5)
			return c.NSWA == 48 && c.IsSWA(4) && !c.IsSWA(5) && b0 == 10000 && b5 == 1e6 && c.FinalSoftcap == 0
		}, "layers 0-4 slide with base 1e4, layer 5 global with 1e6"},
		{"phi3-tiny", func(c *Config) bool { return c.LongRoPE && c.NCtxOrig == 256 && c.NSWA == 0 && c.RopeAttnFactor > 1 }, "LongRoPE, orig 256, SWA off as llama.cpp"},
		{"smollm2-tiny", func(c *Config) bool { return c.Arch == "llama" }, "llama"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Load(familyModel(t, tc.name, gguf.Q8_0), Options{NoVocab: true})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			c := e.Config()
			if !tc.check(&c) {
				t.Fatalf("config %+v: want %s", c, tc.explain)
			}
			if tc.name == "smollm2-tiny" && !e.Report().TiedOutput {
				t.Fatal("smollm2: output not tied to the embedding")
			}
		})
	}
}
