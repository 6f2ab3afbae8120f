package synth

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestFamilyFiles: each family's tiny shape is written with exactly the
// tensors and "<arch>.*" keys a converted model of the family has (names
// as llama.cpp's llama-arch.cpp spells them; which ones as its
// convert_hf_to_gguf.py writes them for these models).
func TestFamilyFiles(t *testing.T) {
	vocab := sharedtest.Stories260K(t)
	base := []string{"context_length", "embedding_length", "block_count", "feed_forward_length",
		"attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon"}
	for _, tc := range []struct {
		shape   string
		global  []string
		layer   []string
		keys    []string
		vocabOf string
	}{
		{"qwen2-tiny", []string{"token_embd", "output_norm"},
			[]string{"attn_norm", "attn_q", "attn_k", "attn_v", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"},
			[]string{"rope.freq_base"}, ""},
		{"qwen3-tiny", []string{"token_embd", "output_norm"},
			[]string{"attn_norm", "attn_q", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"},
			[]string{"rope.freq_base", "attention.key_length", "attention.value_length"}, ""},
		{"gemma2-tiny", []string{"token_embd", "output_norm"},
			[]string{"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "post_attention_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm"},
			[]string{"attention.key_length", "attention.value_length", "attention.sliding_window", "attn_logit_softcapping", "final_logit_softcapping"}, ""},
		{"gemma3-tiny", []string{"token_embd", "output_norm"},
			[]string{"attn_norm", "attn_q", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm", "attn_output", "post_attention_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm"},
			[]string{"rope.freq_base", "attention.key_length", "attention.value_length", "attention.sliding_window"}, ""},
		{"phi3-tiny", []string{"token_embd", "output_norm", "output", "rope_factors_long", "rope_factors_short"},
			[]string{"attn_norm", "attn_qkv", "attn_output", "ffn_norm", "ffn_up", "ffn_down"},
			[]string{"rope.dimension_count", "rope.freq_base", "attention.sliding_window", "rope.scaling.original_context_length", "rope.scaling.attn_factor"},
			VocabPhi3},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			s := Shapes[tc.shape]
			v := vocab
			if tc.vocabOf != "" {
				v = sharedtest.Path(t, tc.vocabOf)
			}
			out := filepath.Join(t.TempDir(), "m.gguf")
			if err := Write(context.Background(), Options{Shape: s, Type: gguf.Q8_0, VocabPath: v, Seed: 1, Out: out}, nil); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			if f.Arch() != s.Arch {
				t.Fatalf("arch %q, want %q", f.Arch(), s.Arch)
			}
			var want []string
			for _, g := range tc.global {
				want = append(want, g+".weight")
			}
			for i := range s.NLayer {
				for _, l := range tc.layer {
					n := fmt.Sprintf("blk.%d.%s", i, l)
					if !strings.HasSuffix(l, ".bias") {
						n += ".weight"
					}
					want = append(want, n)
				}
			}
			var got []string
			for _, ti := range f.Tensors {
				got = append(got, ti.Name)
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("tensors\n got %v\nwant %v", got, want)
			}
			wantKeys := append(slices.Clone(base), tc.keys...)
			var gotKeys []string
			for _, kv := range f.KV {
				if k, ok := strings.CutPrefix(kv.Key, s.Arch+"."); ok {
					gotKeys = append(gotKeys, k)
				}
			}
			slices.Sort(wantKeys)
			slices.Sort(gotKeys)
			if !slices.Equal(gotKeys, wantKeys) {
				t.Fatalf("keys\n got %v\nwant %v", gotKeys, wantKeys)
			}
		})
	}
}
