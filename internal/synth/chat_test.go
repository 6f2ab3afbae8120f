package synth

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// TestChatFamilies: every shape with a chat format is written with the
// family's template, which llama.cpp's template engine renders exactly as
// its built-in template of the family; with the family's control tokens in
// the vocabulary as CONTROL tokens (or the vocabulary's own), the
// end-of-turn id on the family's end-of-turn token, and token_embd as long
// as the vocabulary.
func TestChatFamilies(t *testing.T) {
	msgs := []kernels.ChatMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"},
		{Role: "assistant", Content: "hello"}, {Role: "user", Content: "more"}}
	seen := map[string]bool{}
	var cases []Shape
	for _, name := range ShapeNames() {
		if s := Shapes[name]; s.Chat != "" && s.NEmbd <= 512 {
			cases = append(cases, s)
		}
	}
	// The full-size Qwen and SmolLM2 shapes' vocabulary (GPT-2's BPE).
	gpt2 := Shapes["qwen2-tiny"]
	gpt2.Name, gpt2.Vocab = "qwen2-tiny-gpt2", VocabGPT2
	for _, s := range append(cases, gpt2) {
		name := s.Name
		seen[s.Chat] = true
		t.Run(name, func(t *testing.T) {
			cf := ChatFamilies[s.Chat]
			vocab := sharedtest.Stories260K(t)
			if s.Vocab != "" {
				vocab = sharedtest.Path(t, s.Vocab)
			}
			base, _ := gguf.Open(vocab)
			baseToks, _ := base.GetStringArray("tokenizer.ggml.tokens")
			out := filepath.Join(t.TempDir(), "m.gguf")
			if err := Write(context.Background(), Options{Shape: s, Type: gguf.F32, VocabPath: vocab, Seed: 1, Out: out}, nil); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := f.GetString("tokenizer.chat_template")
			if err != nil {
				t.Fatal(err)
			}
			got, err := kernels.ApplyChatTemplate(tmpl, msgs, true)
			if err != nil {
				t.Fatalf("template: %v\n%s", err, tmpl)
			}
			want, err := kernels.ApplyChatTemplate(cf.Builtin, msgs, true)
			if err != nil || got != want {
				t.Fatalf("the template renders\n%q\nnot as llama.cpp's %s:\n%q (%v)", got, cf.Builtin, want, err)
			}
			toks, _ := f.GetStringArray("tokenizer.ggml.tokens")
			tv, _ := f.GetArray("tokenizer.ggml.token_type")
			types, _ := tv.Int32Array()
			if len(types) != len(toks) {
				t.Fatalf("%d token types for %d tokens", len(types), len(toks))
			}
			for _, c := range cf.Control {
				i := slices.Index(toks, c)
				switch {
				case i < 0:
					t.Errorf("control token %s is not in the vocabulary", c)
				case i >= len(baseToks) && types[i] != tokenControl:
					t.Errorf("added token %s has type %d, want CONTROL", c, types[i])
				case i < len(baseToks):
					t.Logf("%s: the vocabulary's own token %d, type %d", c, i, types[i])
				}
			}
			added := len(toks) - len(baseToks)
			t.Logf("SYNTHETIC %s: %d tokens (%d added), template renders as %s", name, len(toks), added, cf.Builtin)
			if s.Vocab != VocabPhi3 && (added < len(cf.Control) || len(toks)%vocabPad != 0 || added-len(cf.Control) >= vocabPad) {
				t.Errorf("%d tokens added to %d, want %d and padding to a multiple of %d", added, len(baseToks), len(cf.Control), vocabPad)
			}
			for i := len(baseToks) + len(cf.Control); i < len(toks); i++ {
				if types[i] != tokenUnused {
					t.Fatalf("padding token %d %q has type %d, want UNUSED", i, toks[i], types[i])
				}
			}
			eot, err := f.GetUint("tokenizer.ggml.eot_token_id")
			if err != nil || toks[eot] != cf.EOT {
				t.Errorf("eot_token_id %d (%v), want %s", eot, err, cf.EOT)
			}
			if eos, _ := f.GetUint("tokenizer.ggml.eos_token_id"); cf.EOSIsEOT && eos != eot {
				t.Errorf("eos_token_id %d, want the end of turn %d", eos, eot)
			}
			te, _ := f.Tensor("token_embd.weight")
			if te.Dims[1] != int64(len(toks)) {
				t.Errorf("token_embd %v for %d tokens", te.Dims, len(toks))
			}
		})
	}
	for fam := range ChatFamilies {
		if !seen[fam] {
			t.Errorf("no small shape has chat format %s", fam)
		}
	}
}
