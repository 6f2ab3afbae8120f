package host

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestDraftConversation: a session with a Draft is a conversation (also
// stopped by Emit mid-round, and with seeded sampling). Over
// three Generate calls with the Draft (skip:N, self:TYPE, ngram, a draft
// model file; one case with the default policy driving the Draft), every
// emitted token is in the target's KV when Generate returns, the greedy
// text of each turn is the plain greedy text of the same turns on a session
// without a draft, and that of one prompt holding the whole conversation.
// The turns' budgets (7, 1, 40 tokens) end rounds in the middle, so the
// rollback of unemitted round tokens and the final decode are both taken.
func TestDraftConversation(t *testing.T) {
	d := filepath.Join(sharedtest.Dir(), "models", "derived")
	eng, err := Load(filepath.Join(d, "stories260K-ff192-f32.gguf"),
		LoadOptions{Engine: "native", LayerSets: []string{filepath.Join(d, "stories260K-ff192-Q8_0.gguf")}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	turns := []string{"Once upon a time", " The", " She was"}
	budgets := []int{7, 1, 40}
	sc := SessionConfig{NCtx: 128, Threads: 1}
	greedy := GreedySampling()
	newSession := func(t *testing.T) Session {
		s, err := eng.NewSession(sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	run := func(t *testing.T, sess Session, dr *Draft, prompt []int32, n int, before func(int) error) []int32 {
		t.Helper()
		var got []int32
		_, err := Generate(context.Background(), sess, GenerateOptions{Prompt: prompt, NPredict: n, Sampling: greedy, Draft: dr,
			BeforeStep: before, Emit: func(tok int32) error { got = append(got, tok); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	// plain greedy turns: the reference
	plain := newSession(t)
	var want [][]int32
	var prompts [][]int32
	for k, turn := range turns {
		p, err := Tokenize(plain, turn)
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p)
		want = append(want, run(t, plain, nil, p, budgets[k], nil))
	}
	wasm := buildPolicyWasm(t, "default")

	for _, tc := range []struct {
		name, spec string
		k          int
		policy     bool
	}{
		{"skip", "skip:3", 4, false},
		{"self", "self:Q8_0", 3, false},
		{"ngram", "ngram", 3, false},
		{"model", filepath.Join(d, "stories260K-first4layers.gguf"), 4, false},
		{"skip+policy", "skip:2", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := newSession(t)
			o := DraftOptions{Spec: tc.spec, K: tc.k, Sampling: greedy}
			var before func(int) error
			if tc.policy {
				a := attachDefault(t, wasm, sess, &fixedSensors{})
				defer a.Close()
				o.Policy, before = a, a.BeforeStep
			}
			dr, err := AttachDraft(eng, sess, o)
			if err != nil {
				t.Fatal(err)
			}
			defer dr.Close()
			var conv []int32
			for k := range turns {
				conv = append(conv, prompts[k]...)
				got := run(t, sess, dr, prompts[k], budgets[k], before)
				if !slices.Equal(got, want[k]) {
					t.Fatalf("turn %d: with the draft %v, plain %v", k, got, want[k])
				}
				// One prompt holding the whole conversation so far.
				one := run(t, newSession(t), nil, conv, budgets[k], nil)
				if !slices.Equal(got, one) {
					t.Fatalf("turn %d: continued %v, one prompt %v", k, got, one)
				}
				conv = append(conv, got...)
				if sess.Len() != len(conv) {
					t.Fatalf("turn %d: session holds %d positions, the conversation has %d tokens", k, sess.Len(), len(conv))
				}
			}
			st := dr.Stats()
			t.Logf("%s: %+v", tc.spec, st)
			if st.Emitted != len(conv)-len(prompts[0])-len(prompts[1])-len(prompts[2]) {
				t.Errorf("Emitted %d, the turns emitted %d", st.Emitted, len(conv)-len(prompts[0])-len(prompts[1])-len(prompts[2]))
			}
			if st.Rounds == 0 {
				t.Error("no speculative round ran")
			}
		})
	}

	// A Draft per call (as the C API's speculative entry does: attach,
	// Generate, Close), attached mid-conversation after a plain turn; a
	// draft model refuses a session that has decoded.
	t.Run("per call", func(t *testing.T) {
		for _, spec := range []string{"skip:3", "self:Q8_0", "ngram"} {
			sess := newSession(t)
			var conv []int32
			for k := range turns {
				var dr *Draft
				if k > 0 {
					if dr, err = AttachDraft(eng, sess, DraftOptions{Spec: spec, K: 3, Sampling: greedy}); err != nil {
						t.Fatal(err)
					}
				}
				got := run(t, sess, dr, prompts[k], budgets[k], nil)
				if dr != nil {
					dr.Close()
				}
				if !slices.Equal(got, want[k]) {
					t.Fatalf("%s turn %d: with a draft attached for the call %v, plain %v", spec, k, got, want[k])
				}
				conv = append(append(conv, prompts[k]...), got...)
				if sess.Len() != len(conv) {
					t.Fatalf("%s turn %d: session holds %d positions, the conversation has %d tokens", spec, k, sess.Len(), len(conv))
				}
			}
		}
		sess := newSession(t)
		run(t, sess, nil, prompts[0], 2, nil)
		if dr, err := AttachDraft(eng, sess, DraftOptions{Spec: filepath.Join(d, "stories260K-first4layers.gguf"), K: 3, Sampling: greedy}); err == nil {
			dr.Close()
			t.Error("a draft model attached to a session that has decoded")
		}
	})

	// Stopped calls keep the conversation too: Emit's error after 5 tokens
	// (mid-round) leaves exactly those in the session, with a draft as
	// without; and seeded sampling (temperature 0.8) continues a
	// conversation with a draft exactly as plain sampling does (the
	// Draft's sampler starts each call afresh, as Generate's does).
	t.Run("stopped and sampled", func(t *testing.T) {
		errStop := errors.New("stop")
		smp := DefaultSampling()
		smp.Temp, smp.Seed = 0.8, 42
		turn := func(t *testing.T, sess Session, dr *Draft, prompt []int32, stopAt int) []int32 {
			var got []int32
			_, err := Generate(context.Background(), sess, GenerateOptions{Prompt: prompt, NPredict: 12, Sampling: smp, Draft: dr,
				Emit: func(tok int32) error {
					got = append(got, tok)
					if len(got) == stopAt {
						return errStop
					}
					return nil
				}})
			if err != nil && !errors.Is(err, errStop) {
				t.Fatal(err)
			}
			return got
		}
		for _, spec := range []string{"skip:3", "self:Q8_0", filepath.Join(d, "stories260K-first4layers.gguf")} {
			ps, ds := newSession(t), newSession(t)
			dr, err := AttachDraft(eng, ds, DraftOptions{Spec: spec, K: 3, Sampling: smp})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for k := range turns {
				stopAt := []int{5, 0, 0}[k]
				w, g := turn(t, ps, nil, prompts[k], stopAt), turn(t, ds, dr, prompts[k], stopAt)
				n += len(prompts[k]) + len(w)
				if !slices.Equal(g, w) || ds.Len() != n || ps.Len() != n {
					t.Fatalf("%s turn %d: with the draft %v (session %d), plain %v (session %d), want length %d", spec, k, g, ds.Len(), w, ps.Len(), n)
				}
			}
			dr.Close()
		}
	})
}
