package native

import (
	"fmt"
	"slices"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

const (
	specTarget = "models/derived/stories260K-ff192-f32.gguf"
	specQ8     = "models/derived/stories260K-ff192-Q8_0.gguf"
	specQ4     = "models/derived/stories260K-ff192-Q4_0.gguf"
	specFirst4 = "models/derived/stories260K-first4layers.gguf"
)

// specSetup is one KV configuration of the greedy identity test.
type specSetup struct {
	name    string
	kv      engine.KVType
	anchors int
	window  int
}

var specSetups = []specSetup{
	{name: "full"},
	{name: "window48+4", anchors: 4, window: 48},
	{name: "q8_0kv", kv: engine.KVQ8_0},
}

// specSession is a session for setup su: a batch of 16 keeps the ring of a
// windowed session at 4+48+16 slots, so 256 tokens wrap it several times.
func specSession(t *testing.T, e *Engine, su specSetup) *Session {
	t.Helper()
	s, err := e.newSession(engine.SessionConfig{NCtx: 512, NBatch: 16, KVType: su.kv})
	if err != nil {
		t.Fatal(err)
	}
	if su.window > 0 {
		if err := s.SetWindow(su.anchors, su.window); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func specPrompt(t *testing.T, e *Engine) []int32 {
	t.Helper()
	p, err := e.Vocab().Tokenize("Once upon a time, there was a little girl named Lily. She", true)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// plainRun generates n tokens one step at a time: the reference.
func plainRun(t *testing.T, s *Session, p sample.Params, prompt []int32, n int) []int32 {
	t.Helper()
	smp, err := sample.New(p, s.cfg.NVocab)
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, s.cfg.NVocab)
	for i := 0; i < len(prompt); i += s.nBatch {
		if err := s.Decode(prompt[i:min(len(prompt), i+s.nBatch)], engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Logits(s.lastN-1, logits); err != nil {
		t.Fatal(err)
	}
	for _, tk := range prompt {
		smp.Accept(tk)
	}
	var out []int32
	for len(out) < n {
		tok, err := smp.Sample(logits)
		if err != nil {
			t.Fatal(err)
		}
		smp.Accept(tok)
		out = append(out, tok)
		if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if err := s.Logits(0, logits); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// specRun generates at least n tokens with a Speculator and returns the
// first n and the stats.
func specRun(t *testing.T, s *Session, d DraftSpec, p sample.Params, k int, prompt []int32, n int) ([]int32, SpecStats) {
	t.Helper()
	sp, err := NewSpeculator(s, d, p, k)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	tok, err := sp.Start(prompt)
	if err != nil {
		t.Fatal(err)
	}
	out := []int32{tok}
	for len(out) < n {
		toks, err := sp.Step()
		if err != nil {
			t.Fatalf("%s K=%d after %d tokens: %v", d, k, len(out), err)
		}
		out = append(out, toks...)
		if want := len(prompt) + len(out) - 1; s.Len() != want {
			t.Fatalf("%s K=%d: session holds %d positions, want %d", d, k, s.Len(), want)
		}
	}
	return out[:n], sp.Stats()
}

// specDrafts loads every draft kind of the identity test for target e.
func specDrafts(t *testing.T, e *Engine) []DraftSpec {
	t.Helper()
	var ds []DraftSpec
	for _, f := range []string{specQ8, specQ4, specFirst4} {
		de, err := LoadDraft(sharedtest.Path(t, f), e)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { de.Close() })
		ds = append(ds, DraftSpec{Kind: DraftModel, Path: f, Eng: de})
	}
	return append(ds, DraftSpec{Kind: DraftSelf, Type: "q4_0"}, DraftSpec{Kind: DraftSkip, N: 3}, DraftSpec{Kind: DraftNgram})
}

func loadSpecTarget(t *testing.T) *Engine {
	t.Helper()
	e, err := Load(sharedtest.Path(t, specTarget), Options{Threads: 1, ExtraSets: []string{sharedtest.Path(t, specQ4)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestSpecGreedyIdentity: with a greedy sampler, speculative decoding emits
// exactly the plain greedy tokens, for every draft kind and K, with full
// context, a 4-anchor 48-token window (the ring wraps) and Q8_0 KV.
func TestSpecGreedyIdentity(t *testing.T) {
	e := loadSpecTarget(t)
	prompt := specPrompt(t, e)
	const n = 256
	greedy := sample.Params{TopP: 1, RepeatPenalty: 1}
	drafts := specDrafts(t, e)
	for _, su := range specSetups {
		s := specSession(t, e, su)
		want := plainRun(t, s, greedy, prompt, n)
		s.Close()
		for _, d := range drafts {
			for _, k := range []int{1, 2, 4, 8} {
				t.Run(fmt.Sprintf("%s/%s/K%d", su.name, d, k), func(t *testing.T) {
					s := specSession(t, e, su)
					defer s.Close()
					got, st := specRun(t, s, d, greedy, k, prompt, n)
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("token %d: speculative %d, plain %d", i, got[i], want[i])
					}
					t.Logf("acceptance %.3f, mean accepted %.2f, rounds %d, plain steps %d", st.Acceptance(), st.MeanAccepted(), st.Rounds, st.PlainSteps)
				})
			}
		}
	}
}

func firstDiff(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

var _ = slices.Equal[[]int32]
