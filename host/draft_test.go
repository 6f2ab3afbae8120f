package host

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestAttachDraft: speculative decoding through host gives the same greedy
// tokens as Generate for each kind of draft (greedy verification keeps
// exactly the model's argmax), its counters add up, and bad drafts are
// typed or one-line errors naming the draft.
func TestAttachDraft(t *testing.T) {
	d := filepath.Join(sharedtest.Dir(), "models", "derived")
	target := filepath.Join(d, "stories260K-ff192-f32.gguf")
	eng, err := Load(target, LoadOptions{Engine: "native", LayerSets: []string{filepath.Join(d, "stories260K-ff192-Q8_0.gguf")}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	greedy := SamplingParams{TopP: 1, RepeatPenalty: 1}
	vocab := eng.Vocab()
	prompt, err := vocab.Tokenize("Once upon a time", true)
	if err != nil {
		t.Fatal(err)
	}
	const n = 48
	sc := SessionConfig{NCtx: 128, Threads: 1}
	newSession := func(t *testing.T) Session {
		sess, err := eng.NewSession(sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		return sess
	}
	var want []int32
	if _, err := Generate(context.Background(), newSession(t), GenerateOptions{Prompt: prompt, NPredict: n, Sampling: greedy,
		Emit: func(tok int32) error { want = append(want, tok); return nil }}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, spec, canon string
		k                 int
		auto              bool
	}{
		{"skip", "skip:3", "skip:3", 4, false},
		{"self", "self:Q8_0", "self:q8_0", 2, false},
		{"ngram", "ngram", "ngram", 3, false},
		{"model", filepath.Join(d, "stories260K-first4layers.gguf"), filepath.Join(d, "stories260K-first4layers.gguf"), 4, false},
		{"auto", "skip:3", "skip:3", 1, true},
		{"k clamped", "skip:2", "skip:2", abi.MaxSpecK + 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := newSession(t)
			dr, err := AttachDraft(eng, sess, DraftOptions{Spec: tc.spec, K: tc.k, Auto: tc.auto, Sampling: greedy})
			if err != nil {
				t.Fatal(err)
			}
			defer dr.Close()
			if got := dr.String(); got != tc.canon {
				t.Errorf("String() = %q, want %q", got, tc.canon)
			}
			if !tc.auto && dr.K() != min(tc.k, abi.MaxSpecK) {
				t.Errorf("K() = %d, want %d", dr.K(), min(tc.k, abi.MaxSpecK))
			}
			tok, err := dr.Start(prompt)
			if err != nil {
				t.Fatal(err)
			}
			got, last := []int32{tok}, 1
			for len(got) < n {
				out, err := dr.Step()
				last = len(out)
				if err != nil {
					t.Fatal(err)
				}
				if len(out) == 0 {
					t.Fatal("Step generated no token")
				}
				got = append(got, out...)
			}
			if i := firstDiff(got[:n], want); i >= 0 {
				t.Fatalf("token %d differs from plain greedy generation: %d, want %d", i, got[i], want[i])
			}
			st := dr.Stats()
			accAt := 0
			for _, a := range st.AcceptedAt {
				accAt += a
			}
			if st.Emitted != len(got) || st.Accepted > st.Drafted || accAt != st.Accepted || (st.Rounds == 0) != (st.Drafted == 0) {
				t.Errorf("counters do not add up: %+v (%d tokens)", st, len(got))
			}
			if dr.ArenaBytes() <= 0 || dr.KVBytes() < 0 || dr.KVBytes() > dr.ArenaBytes() {
				t.Errorf("arena %d bytes, draft part %d", dr.ArenaBytes(), dr.KVBytes())
			}
			if tc.name == "model" && dr.KVBytes() == 0 {
				t.Error("a draft model's KV counts no bytes")
			}
			// Finish keeps the first n tokens: the session holds them all.
			if err := dr.Finish(last - (len(got) - n)); err != nil || sess.Len() != len(prompt)+n {
				t.Errorf("Finish: %v; session holds %d positions, want %d", err, sess.Len(), len(prompt)+n)
			}
		})
	}

	// Generate with a Draft: the same tokens, BeforeStep before the prefill
	// (step 0), before every round and before the final decode, the decode figures from the rounds
	// after the first.
	t.Run("generate", func(t *testing.T) {
		for _, spec := range []string{"skip:3", filepath.Join(d, "stories260K-first4layers.gguf")} {
			sess := newSession(t)
			dr, err := AttachDraft(eng, sess, DraftOptions{Spec: spec, K: 4, Sampling: greedy})
			if err != nil {
				t.Fatal(err)
			}
			defer dr.Close()
			var got []int32
			steps := 0
			st, err := Generate(context.Background(), sess, GenerateOptions{Prompt: prompt, NPredict: n, Draft: dr, MeasureCPU: true,
				Emit: func(tok int32) error { got = append(got, tok); return nil },
				BeforeStep: func(step int) error {
					if (step == 0) != (steps == 0) {
						return fmt.Errorf("BeforeStep(%d) as call %d: step 0 comes first, once", step, steps+1)
					}
					steps++
					return nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("%s: token %d differs from plain greedy generation", spec, i)
			}
			ds := dr.Stats()
			// BeforeStep: step 0, each round, and the final decode of the
			// last token when the last round was emitted whole.
			rounds := ds.Rounds + ds.PlainSteps
			if st.GeneratedTokens != n || st.PromptTokens != len(prompt) || (steps != 1+rounds && steps != 2+rounds) ||
				st.DecodeTokens <= 0 || st.DecodeTokens >= n || st.Decode <= 0 || st.DecodeCPU <= 0 {
				t.Errorf("%s: stats %+v, %d BeforeStep calls, draft %+v", spec, st, steps, ds)
			}
		}
		sess := newSession(t)
		dr, err := AttachDraft(eng, sess, DraftOptions{Spec: "skip:3", K: 2, Sampling: greedy})
		if err != nil {
			t.Fatal(err)
		}
		defer dr.Close()
		for name, o := range map[string]GenerateOptions{
			"another session": {Prompt: prompt, NPredict: 4, Draft: dr},
			"OnLogits":        {Prompt: prompt, NPredict: 4, Draft: dr, OnLogits: func(int, []float32) error { return nil }},
		} {
			s := sess
			if name == "another session" {
				s = newSession(t)
			}
			if _, err := Generate(context.Background(), s, o); err == nil {
				t.Errorf("%s: no error", name)
			}
		}
	})

	// With a policy the Adapter drives the Draft: the decision in force
	// starts at its K and the sensors are its measurements.
	t.Run("policy", func(t *testing.T) {
		a := &Adapter{eng: eng}
		dr, err := AttachDraft(eng, newSession(t), DraftOptions{Spec: "skip:3", K: 3, Auto: true, Sampling: greedy, Policy: a})
		if err != nil {
			t.Fatal(err)
		}
		defer dr.Close()
		if a.spec == nil || a.cur.SpecK != 3 {
			t.Fatalf("adapter: speculation attached %v, K %d (want 3)", a.spec != nil, a.cur.SpecK)
		}
	})

	t.Run("errors", func(t *testing.T) {
		lc, err := Load(target, LoadOptions{Engine: "llamacpp"})
		if err != nil {
			t.Fatal(err)
		}
		defer lc.Close()
		ls, err := lc.NewSession(sc)
		if err != nil {
			t.Fatal(err)
		}
		defer ls.Close()
		if _, err := AttachDraft(lc, ls, DraftOptions{Spec: "skip:3", K: 2, Sampling: greedy}); !errors.Is(err, ErrDraftEngine) {
			t.Errorf("llamacpp engine: err = %v, want ErrDraftEngine", err)
		}
		for _, c := range []struct {
			spec, want string
			is         error
		}{
			{"", "empty draft spec", ErrDraftSpec},
			{"skip:0", "skip:0", ErrDraftSpec},
			{"skip:5", "skip:5", nil},
			{"self:q4_0", "q4_0", nil},
			{filepath.Join(t.TempDir(), "missing.gguf"), "missing.gguf", nil},
		} {
			_, err := AttachDraft(eng, newSession(t), DraftOptions{Spec: c.spec, K: 2, Sampling: greedy})
			if err == nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
				t.Errorf("spec %q: err = %v, want one naming %q (is %v)", c.spec, err, c.want, c.is)
			}
		}
	})
}

func firstDiff(a, b []int32) int {
	if slices.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
