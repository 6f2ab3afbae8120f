package native

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/synth"
)

// TestSynthAgreeShare: the hashed share of agreeing positions is p within
// 5 binomial standard deviations over 20,000 positions.
func TestSynthAgreeShare(t *testing.T) {
	const n = 20000
	for _, p := range []float32{0.2, 0.5, 0.7, 0.9} {
		k := 0
		for pos := range int32(n) {
			if synthAgreeAt(pos, p) {
				k++
			}
		}
		sd := math.Sqrt(float64(p) * float64(1-p) / n)
		if got := float64(k) / n; math.Abs(got-float64(p)) > 5*sd {
			t.Errorf("p %.1f: share %.4f, want within %.4f", p, got, 5*sd)
		}
	}
}

// TestSynthAgreeSkip: on the SYNTHETIC pair (stories260K with layers ≥ 3
// adding nothing, SIMULATED agreement 0.6), a skip:3 draft at K = 1 is
// accepted at every agreeing position and rejected at every other, and the
// output is still the plain greedy output of the target.
func TestSynthAgreeSkip(t *testing.T) {
	const from, agree, n = 3, 0.6, 64
	pair := filepath.Join(t.TempDir(), "pair.gguf")
	if err := synth.ZeroFrom(sharedtest.Path(t, specTarget), pair, from); err != nil {
		t.Fatal(err)
	}
	e, err := Load(pair, Options{Threads: 1, SynthAgree: agree})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	greedy := sample.Params{TopP: 1, RepeatPenalty: 1}
	prompt := specPrompt(t, e)
	plain := plainRun(t, specSession(t, e, specSetup{}), greedy, prompt, n)

	s := specSession(t, e, specSetup{})
	defer s.Close()
	sp, err := NewSpeculator(s, DraftSpec{Kind: DraftSkip, N: from}, greedy, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	tok, err := sp.Start(prompt)
	if err != nil {
		t.Fatal(err)
	}
	out := []int32{tok}
	agreed, other := 0, 0
	for len(out) < n {
		pos := int32(s.Len()) // the verify row that judges the draft
		toks, err := sp.Step()
		if err != nil {
			t.Fatal(err)
		}
		if synthAgreeAt(pos, agree) {
			agreed++
			if len(toks) != 2 {
				t.Fatalf("position %d agrees by construction but the draft was rejected", pos)
			}
		} else {
			other++
			if len(toks) != 1 {
				t.Fatalf("position %d is a SIMULATED miss but the draft was accepted", pos)
			}
		}
		out = append(out, toks...)
	}
	if agreed == 0 || other == 0 {
		t.Fatalf("positions: %d agreeing, %d not: the mix is not mixing", agreed, other)
	}
	if i := slices.Compare(out[:n], plain); i != 0 {
		t.Fatalf("speculative output differs from plain greedy on the mixed target")
	}
	st := sp.Stats()
	t.Logf("acceptance %.3f over %d rounds (%d agreeing positions, %d not)", st.Acceptance(), st.Rounds, agreed, other)
}
