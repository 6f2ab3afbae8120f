package calib

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestProofBudget8Exhaustive backs the proof's one failing budget
// (docs/BENCHMARKS.md): at 8.0 bits the nearest uniform assignment is all
// Q8_0 (8.5 bits, more than the budget), and no assignment within 8.0 bits
// (every one of the 4^5 that fits, measured on the held-out half of
// stories.txt as `calibrate --eval` splits it) has a KL at or below all
// Q8_0's, so no allocator can meet (b) there. Opt-in
// (EDGELLM_PROOF_EXHAUSTIVE=1): a few hundred whole-model runs, ~1 min of
// CPU.
func TestProofBudget8Exhaustive(t *testing.T) {
	if os.Getenv("EDGELLM_PROOF_EXHAUSTIVE") == "" {
		t.Skip("set EDGELLM_PROOF_EXHAUSTIVE=1 to run")
	}
	p := ladderPaths(t, "f32", "Q8_0", "Q5_0", "Q4_0")
	eng, err := native.Load(p[0], native.Options{Threads: 1, ExtraSets: p[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	text, err := os.ReadFile(sharedtest.Path(t, "text/stories.txt"))
	if err != nil {
		t.Fatal(err)
	}
	toks, err := eng.Vocab().Tokenize(secondHalf(string(text)), true)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(eng, toks, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n, sets := eng.Config().NLayer, SetsOf(eng)
	if err := r.Sess.SetLayerSets(Uniform(n, 0)); err != nil {
		t.Fatal(err)
	}
	ref, err := r.NewReference()
	if err != nil {
		t.Fatal(err)
	}
	kl := func(a []int) float64 {
		if err := r.Sess.SetLayerSets(a); err != nil {
			t.Fatal(err)
		}
		sc, err := r.Score(ref)
		if err != nil {
			t.Fatal(err)
		}
		return sc.KL
	}
	const budget = 8.0
	uniform := kl(Uniform(n, 1))
	best, bestA, runs := math.Inf(1), "", 0
	a := make([]int, n)
	for code := range 1 << (2 * n) {
		for il, c := 0, code; il < n; il, c = il+1, c>>2 {
			a[il] = c & 3
		}
		if AvgBits(a, sets) > budget+1e-9 {
			continue
		}
		runs++
		if k := kl(a); k < best {
			best, bestA = k, fmt.Sprint(a)
		}
	}
	t.Logf("budget %.1f: %d assignments fit; least held-out KL %.5f (%s); all Q8_0 (8.5 bits) %.5f", budget, runs, best, bestA, uniform)
	if !(best > uniform) {
		t.Fatalf("an assignment within %.1f bits has KL %.5f ≤ all Q8_0's %.5f: the budget is not infeasible", budget, best, uniform)
	}
}

// secondHalf is the held-out half of calibrate --eval (cmd/edgellm
// splitHalves): from the paragraph break nearest the middle.
func secondHalf(text string) string {
	mid, best := len(text)/2, -1
	for i := 0; i+1 < len(text); i++ {
		if text[i] == '\n' && text[i+1] == '\n' && (best < 0 || absInt(i-mid) < absInt(best-mid)) {
			best = i
		}
	}
	if best < 0 {
		return text[mid:]
	}
	return strings.TrimSpace(text[best:])
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
