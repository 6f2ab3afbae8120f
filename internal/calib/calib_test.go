package calib

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/precision"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

func ladderPaths(t *testing.T, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		out = append(out, sharedtest.Path(t, "models/derived/stories260K-ff192-"+n+".gguf"))
	}
	return out
}

func loadLadder(t *testing.T) (*native.Engine, []int32) {
	t.Helper()
	p := ladderPaths(t, "f32", "Q8_0", "Q4_0")
	eng, err := native.Load(p[0], native.Options{Threads: 1, ExtraSets: p[1:]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	text, err := os.ReadFile(sharedtest.Path(t, "text/stories.txt"))
	if err != nil {
		t.Fatal(err)
	}
	toks, err := eng.Vocab().Tokenize(string(text[:len(text)/2]), true)
	if err != nil {
		t.Fatal(err)
	}
	return eng, toks
}

// TestCalibrate checks the machinery on stories260K (F32 base, Q8_0, Q4_0):
// the base against itself scores KL 0; every (layer, set) was measured; the
// manifest validates, carries the model's digest and survives embedding.
func TestCalibrate(t *testing.T) {
	eng, toks := loadLadder(t)
	runs := 0
	m, err := Calibrate(eng, toks, Options{Threads: 1, Chunk: 128, Progress: func(done, total, _ int, _ precision.Set, _ Score) {
		runs++
		if done != runs || total != 5*2 {
			t.Fatalf("progress %d/%d after %d runs", done, total, runs)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if runs != 10 || len(m.Layers) != 5 {
		t.Fatalf("%d runs, %d layers", runs, len(m.Layers))
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		if len(l.Precisions) != 2 || l.MaxBits != 32 || l.Weights.Sigma <= 0 || l.Clamp.Threshold != DefaultClampSigma*l.Weights.Sigma {
			t.Fatalf("layer %+v", l)
		}
		for _, p := range l.Precisions {
			if !(p.KL > 0) || math.IsInf(p.KL, 0) {
				t.Fatalf("layer %d: KL %v on %s", l.Layer, p.KL, p.Set)
			}
		}
	}
	// Base against itself: zero up to the reference's float32 rounding.
	r, err := NewRunner(eng, toks, 128, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ref, err := r.NewReference()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := r.Score(ref)
	if err != nil {
		t.Fatal(err)
	}
	// The reference keeps float32 log-probabilities: |log p| < 64 rounds by
	// at most 2^-18 (3.8e-6), which bounds the KL of identical logits.
	if sc.KL > 4e-6 || math.Abs(sc.PPL-m.Calibration.BasePPL) > 4e-6*sc.PPL {
		t.Fatalf("base vs base: KL %v, ppl %v (manifest %v)", sc.KL, sc.PPL, m.Calibration.BasePPL)
	}
	// Embedding keeps the digest and the manifest.
	dir := t.TempDir()
	out := filepath.Join(dir, "with-manifest.gguf")
	if err := precision.Embed(eng.SetWeights(0).Path, out, m); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := precision.FromGGUF(f, 5)
	if err != nil || got == nil || got.Layers[3].Precisions[1].KL != m.Layers[3].Precisions[1].KL {
		t.Fatalf("embedded: %v, %v", got, err)
	}
	if precision.Digest(f) != m.Model.Digest {
		t.Fatal("embedding changed the digest")
	}
	// A manifest for another model is refused by Embed, leaving nothing.
	other := *m
	other.Model.Digest = "sha256:0"
	if err := precision.Embed(eng.SetWeights(0).Path, filepath.Join(dir, "x.gguf"), &other); !errors.Is(err, precision.ErrModel) {
		t.Fatalf("other model: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files in the output dir, want 1", len(ents))
	}
}

func TestCalibrateBadInput(t *testing.T) {
	eng, toks := loadLadder(t)
	if _, err := Calibrate(eng, toks[:40], Options{Threads: 1}); !errors.Is(err, ErrTextTooShort) {
		t.Fatalf("short text: %v", err)
	}
	if err := CheckLayers(129); !errors.Is(err, precision.ErrTooLarge) {
		t.Fatalf("129 layers: %v", err)
	}
	p := ladderPaths(t, "f32")
	if _, err := native.Load(p[0], native.Options{ExtraSets: []string{sharedtest.Path(t, "models/derived/stories260K-first4layers.gguf")}}); err == nil {
		t.Fatal("a set of another model was accepted")
	}
}

// TestCalibratedOptimal: the DP finds the same optimum as brute force over
// every assignment of a made-up manifest, within the budget.
func TestCalibratedOptimal(t *testing.T) {
	sets := []precision.Set{{File: "a", Bits: 32, BitsPerWeight: 32, Base: true}, {File: "b", Bits: 8, BitsPerWeight: 8.5},
		{File: "c", Bits: 5, BitsPerWeight: 5.5}, {File: "d", Bits: 4, BitsPerWeight: 4.5}}
	kls := [][]float64{{0.01, 0.05, 0.2}, {0.001, 0.002, 0.004}, {0.02, 0.03, 0.5}, {0.005, 0.01, 0.011}}
	m := &precision.Manifest{Sets: sets}
	for il, k := range kls {
		l := precision.Layer{Layer: il, MinBits: 4}
		for j, v := range k {
			l.Precisions = append(l.Precisions, precision.Precision{Bits: sets[j+1].Bits, Set: sets[j+1].File, KL: v})
		}
		m.Layers = append(m.Layers, l)
	}
	sum := func(a []int) float64 {
		var s float64
		for il, si := range a {
			s += klOf(m, il, si)
		}
		return s
	}
	for _, b := range []float64{4.5, 5, 5.5, 6.25, 8.5, 12, 32} {
		got, ok := Calibrated(m, b)
		if !ok || AvgBits(got, sets) > b+1e-9 {
			t.Fatalf("budget %g: %v (%v)", b, got, ok)
		}
		best := math.Inf(1)
		a := make([]int, 4)
		var rec func(i int)
		rec = func(i int) {
			if i == 4 {
				if AvgBits(a, sets) <= b+1e-9 {
					best = min(best, sum(a))
				}
				return
			}
			for s := range sets {
				a[i] = s
				rec(i + 1)
			}
		}
		rec(0)
		if math.Abs(sum(got)-best) > 1e-12 {
			t.Fatalf("budget %g: DP %v sums %v, brute force %v", b, got, sum(got), best)
		}
	}
	// Exactly equal bits: every draw costs what the target does, no draw
	// repeats, and the count of all assignments at that cost bounds them.
	target := Cost([]int{2, 2, 3, 1}, sets)
	all := 0
	for _, a := range All(4, len(sets)) {
		if Cost(a, sets) == target {
			all++
		}
	}
	draws := RandomAt(sets, 4, target, 1000, 1)
	if len(draws) != all || all < 2 {
		t.Fatalf("%d draws at cost %d, %d assignments have it", len(draws), target, all)
	}
	for _, d := range draws {
		if Cost(d, sets) != target {
			t.Fatalf("random draw %v at %v bits", d, AvgBits(d, sets))
		}
	}
}

// TestMeasurePath: on stories260K (F32 base, Q8_0, Q4_0) the measured path
// starts at the base against itself (KL 0), moves exactly one layer to a set
// with fewer bits per step, ends with every layer on Q4_0, and OnPath keeps
// within the budget and picks the least KL there.
func TestMeasurePath(t *testing.T) {
	eng, toks := loadLadder(t)
	r, err := NewRunner(eng, toks[:min(len(toks), 200)], 128, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := eng.Config().NLayer
	if err := r.Sess.SetLayerSets(Uniform(n, 0)); err != nil {
		t.Fatal(err)
	}
	ref, err := r.NewReference()
	if err != nil {
		t.Fatal(err)
	}
	sets := SetsOf(eng)
	steps := 0
	path, err := MeasurePath(r, ref, sets, n, func(PathPoint) { steps++ })
	if err != nil {
		t.Fatal(err)
	}
	if steps != len(path)-1 || path[0].KL != 0 || fmt.Sprint(path[0].Sets) != fmt.Sprint(Uniform(n, 0)) {
		t.Fatalf("path starts %+v after %d progress calls for %d points", path[0], steps, len(path))
	}
	if last := path[len(path)-1]; fmt.Sprint(last.Sets) != fmt.Sprint(Uniform(n, 2)) {
		t.Fatalf("path ends at %v, want every layer on Q4_0", last.Sets)
	}
	for i := 1; i < len(path); i++ {
		moved := 0
		for il := range n {
			if a, b := path[i-1].Sets[il], path[i].Sets[il]; a != b {
				moved++
				if sets[b].BitsPerWeight >= sets[a].BitsPerWeight {
					t.Errorf("step %d: layer %d %s → %s is not down", i, il, sets[a].Type, sets[b].Type)
				}
			}
		}
		if moved != 1 {
			t.Errorf("step %d moved %d layers: %v → %v", i, moved, path[i-1].Sets, path[i].Sets)
		}
	}
	for _, budget := range []float64{4.5, 6, 8.5, 20, 32} {
		a, ok := OnPath(path, budget)
		if !ok || AvgBits(a, sets) > budget+1e-9 {
			t.Fatalf("budget %g: %v (%v)", budget, a, ok)
		}
		for _, p := range path {
			if p.AvgBits <= budget+1e-9 && fmt.Sprint(p.Sets) != fmt.Sprint(a) && p.KL < klOnPath(path, a) {
				t.Errorf("budget %g: %v has KL %g below the pick %v", budget, p.Sets, p.KL, a)
			}
		}
	}
	if _, ok := OnPath(path, 4); ok {
		t.Error("a point below the lowest set's bits")
	}
}

func klOnPath(path []PathPoint, a []int) float64 {
	for _, p := range path {
		if fmt.Sprint(p.Sets) == fmt.Sprint(a) {
			return p.KL
		}
	}
	return math.Inf(1)
}

// TestRefine: with an additive measure Refine keeps Calibrated's choice;
// with a measure that charges an interaction it picks the neighbour the
// measure favours; it never leaves the budget nor, when Calibrated kept
// them, the layers' min_bits; and it measures each candidate once.
func TestRefine(t *testing.T) {
	sets := []precision.Set{{File: "a", Bits: 32, BitsPerWeight: 32, Base: true}, {File: "b", Bits: 8, BitsPerWeight: 8.5},
		{File: "c", Bits: 5, BitsPerWeight: 5.5}, {File: "d", Bits: 4, BitsPerWeight: 4.5}}
	kls := [][]float64{{0.001, 0.01, 0.03}, {0.001, 0.01, 0.031}, {0.001, 0.01, 0.032}, {0.001, 0.02, 0.04}}
	m := &precision.Manifest{Sets: sets}
	for il, k := range kls {
		l := precision.Layer{Layer: il, MinBits: 4}
		if il == 3 {
			l.MinBits = 5
		}
		for j, v := range k {
			l.Precisions = append(l.Precisions, precision.Precision{Bits: sets[j+1].Bits, Set: sets[j+1].File, KL: v})
		}
		m.Layers = append(m.Layers, l)
	}
	additive := func(a []int) float64 {
		var s float64
		for il, si := range a {
			s += klOf(m, il, si)
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		budget  float64
		measure func(a []int) float64
		want    string
	}{
		// 5 bits: two layers on Q4_0, two on Q5_0 (layer 3 may not go
		// below 5 bits); the sum is least with layers 0 and 1 on Q4_0.
		{"additive keeps the optimum", 5.0, additive, "[3 3 2 2]"},
		// Layers 0 and 1 on Q4_0 together cost 0.1 more (an interaction
		// the per-layer sum misses): the swap of layers 1 and 2 wins.
		{"interaction", 5.0, func(a []int) float64 {
			s := additive(a)
			if a[0] == 3 && a[1] == 3 {
				s += 0.1
			}
			return s
		}, "[3 2 3 2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := map[string]int{}
			got, err := Refine(m, tc.budget, func(a []int) (float64, error) {
				calls[fmt.Sprint(a)]++
				if AvgBits(a, sets) > tc.budget+1e-9 || sets[a[3]].Bits < 5 {
					t.Errorf("measured %v: outside the budget or min_bits", a)
				}
				return tc.measure(a), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != tc.want {
				t.Fatalf("Refine = %v, want %s", got, tc.want)
			}
			for a, n := range calls {
				if n != 1 {
					t.Errorf("%s measured %d times", a, n)
				}
			}
		})
	}
	if _, err := Refine(m, 4, func([]int) (float64, error) { return 0, nil }); err == nil {
		t.Error("a budget below every set was accepted")
	}
}
