package sample

import (
	"math"
	"testing"
)

// TestDrawKeyedByPosition: a draw is a function of (seed, position, the
// distribution) only: sampling the same logits at the same position again,
// from another Sampler, after any number of other calls, gives the same
// token; DrawAt(d, ahead) is the draw Sample makes once ahead more tokens
// are accepted. This is what makes speculative text independent of K.
func TestDrawKeyedByPosition(t *testing.T) {
	logits := make([]float32, 300)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)*1.7)) * 2
	}
	p := Params{Temp: 1, TopP: 1, RepeatPenalty: 1, Seed: 11}
	a, _ := New(p, len(logits))
	b, _ := New(p, len(logits))
	var d Dist
	if err := a.Dist(logits, nil, &d); err != nil {
		t.Fatal(err)
	}
	diff := 0
	for pos := range 200 {
		ta, _ := a.Sample(logits)
		again, _ := a.Sample(logits) // same position: same token
		if ahead := b.DrawAt(&d, pos); ahead != ta || again != ta {
			t.Fatalf("pos %d: Sample %d, again %d, DrawAt(+%d) %d", pos, ta, again, pos, ahead)
		}
		if pos > 0 && ta != d.Race(p.Seed, pos-1) {
			diff++
		}
		a.Accept(ta)
	}
	if diff < 150 {
		t.Fatalf("only %d of 199 positions drew differently from the one before: the noise is not keyed by position", diff)
	}
}

// TestRaceCoupling: two distributions raced with the same noise agree
// whenever they are equal, and agree with probability at least
// (1−δ)/(1+δ) (δ their total variation; the Gumbel coupling's bound) when
// they differ; each marginal stays exact (checked by
// TestDistributionMatchesSoftmax through Sample).
func TestRaceCoupling(t *testing.T) {
	p := Dist{Tok: []int32{0, 1, 2, 3}, P: []float32{0.5, 0.3, 0.15, 0.05}}
	q := Dist{Tok: []int32{0, 1, 2, 3}, P: []float32{0.3, 0.5, 0.1, 0.1}}
	var tv float64
	for i := range p.P {
		tv += math.Abs(float64(p.P[i]-q.P[i])) / 2
	}
	const n = 100000
	same := 0
	for pos := range n {
		if p.Race(5, pos) != p.Race(5, pos) {
			t.Fatal("a race is not deterministic")
		}
		if p.Race(5, pos) == q.Race(5, pos) {
			same++
		}
	}
	// Binomial: 5 standard deviations below the bound fails.
	bound := (1 - tv) / (1 + tv)
	sd := math.Sqrt(bound * (1 - bound) / n)
	if got := float64(same) / n; got < bound-5*sd || got > 1-tv+5*sd {
		t.Fatalf("agreement %.4f: want in [(1−δ)/(1+δ), 1−δ] = [%.4f, %.4f] (δ %.2f)", got, bound, 1-tv, tv)
	}
}
