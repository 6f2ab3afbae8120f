package host

import (
	"context"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/synthtest"
)

// splitControls is the prompt's tokens as the test expects them, built
// without TokenizeChat: the text is cut at the family's control tokens
// (found by text); each is its one id in the vocabulary, each run of text
// between them is tokenized as text (without the whitespace after a
// control token, with rstrip), BOS first when the vocabulary adds it.
func splitControls(t *testing.T, v Vocab, text string, ids map[string]int32, rstrip bool) []int32 {
	t.Helper()
	names := make([]string, 0, len(ids))
	for n := range ids {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	out, err := v.Tokenize("", true)
	if err != nil {
		t.Fatal(err)
	}
	for text != "" {
		at, name := len(text), ""
		for _, n := range names {
			if k := strings.Index(text, n); k >= 0 && k < at {
				at, name = k, n
			}
		}
		if at > 0 {
			toks, err := v.Tokenize(text[:at], false)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, toks...)
		}
		if name == "" {
			break
		}
		out = append(out, ids[name])
		text = text[at+len(name):]
		if rstrip {
			text = strings.TrimLeft(text, " \t\n")
		}
	}
	return out
}

// TestChatFamilies: on each family's SYNTHETIC tiny model, carrying the
// family's chat template and control tokens, both engines report the
// template (ModelInfo.ChatTemplate), TokenizeChat makes each of the
// template's control tokens one token id (the vocabulary's, by text) and
// the rest text, and the end-of-turn token ends generation: on a copy of
// the model whose greedy reply is that token (synthtest.EndTurn),
// Generate stops before emitting anything.
func TestChatFamilies(t *testing.T) {
	msgs := []ChatMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi there"},
		{Role: "assistant", Content: "Hello!"}, {Role: "user", Content: "What is 2+2?"}}
	for _, name := range synthtest.TinyFamilies {
		t.Run(name, func(t *testing.T) {
			path, cf := synthtest.FamilyChatModel(t, name)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			fileTmpl, _ := f.GetString("tokenizer.chat_template")
			vocabToks, _ := f.GetStringArray("tokenizer.ggml.tokens")
			ids := map[string]int32{}
			for _, c := range cf.Control {
				ids[c] = int32(slices.Index(vocabToks, c))
			}
			rigged := filepath.Join(t.TempDir(), "endturn.gguf")
			eot := synthtest.EndTurn(t, path, rigged)
			for _, kind := range []string{"native", "llamacpp"} {
				eng, err := Load(path, LoadOptions{Engine: kind})
				if err != nil {
					t.Fatal(err)
				}
				tmpl := eng.Info().ChatTemplate
				if tmpl != fileTmpl || tmpl == "" {
					t.Errorf("%s: ChatTemplate %q, want the file's %q", kind, tmpl, fileTmpl)
				}
				v := eng.Vocab()
				text, err := ApplyChatTemplate(tmpl, msgs, true)
				if err != nil {
					t.Fatal(err)
				}
				// llama.cpp marks every special token of a model named
				// Phi-3 RSTRIP: the whitespace after it is dropped.
				want := splitControls(t, v, text, ids, cf.Name == "phi3")
				got, err := TokenizeChat(v, tmpl, msgs, true)
				eng.Close()
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("%s: TokenizeChat\n got %v (%v)\nwant %v\nof %q", kind, got, err, want, text)
				}
				nControl, inText := 0, 0
				for _, tok := range got {
					if slices.Contains(idsOf(ids), tok) {
						nControl++
					}
				}
				for c := range ids {
					inText += strings.Count(text, c)
				}
				if nControl != inText || nControl == 0 {
					t.Fatalf("%s: %d control tokens in the prompt, want the %d the text has", kind, nControl, inText)
				}

				eng, err = Load(rigged, LoadOptions{Engine: kind})
				if err != nil {
					t.Fatal(err)
				}
				sess, err := eng.NewSession(SessionConfig{NCtx: 256, Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				var first []int32
				st, err := Generate(context.Background(), sess, GenerateOptions{Prompt: got, NPredict: 1, Sampling: GreedySampling(),
					IgnoreEOG: true, Emit: func(tok int32) error { first = append(first, tok); return nil }})
				if err != nil || !slices.Equal(first, []int32{eot}) {
					t.Fatalf("%s: the rigged model's reply %v (%v), want the end of turn %d", kind, first, err, eot)
				}
				sess.Close()
				if sess, err = eng.NewSession(SessionConfig{NCtx: 256, Threads: 1}); err != nil {
					t.Fatal(err)
				}
				st, err = Generate(context.Background(), sess, GenerateOptions{Prompt: got, NPredict: 8, Sampling: GreedySampling()})
				sess.Close()
				eng.Close()
				if err != nil || !st.StoppedAtEOG || st.GeneratedTokens != 0 {
					t.Fatalf("%s: %+v (%v): want a stop at the end of turn %s before any token", kind, st, err, cf.EOT)
				}
				t.Logf("SYNTHETIC %s, %s: %d prompt tokens, %d of them control; stops at %s (%d)", name, kind, len(got), nControl, cf.EOT, eot)
			}
		})
	}
}

func idsOf(m map[string]int32) []int32 {
	var out []int32
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
