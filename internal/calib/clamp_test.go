package calib

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/native"
)

// TestQuantizeClamped checks the machinery, not whether clamping helps: a
// huge K clamps nothing and gives the same bytes as no clamping; K = 3
// clamps exactly the weights beyond 3σ of the layers asked for, the result
// loads as a weight set of the same model; a bad type leaves no file.
func TestQuantizeClamped(t *testing.T) {
	src := ladderPaths(t, "f32")[0]
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	none, err := QuantizeClamped(src, p("a.gguf"), gguf.Q4_0, 1e6, map[int]bool{})
	if err != nil || len(none) != 0 {
		t.Fatalf("no layer: %v %v", none, err)
	}
	huge, err := QuantizeClamped(src, p("b.gguf"), gguf.Q4_0, 1e6, nil)
	if err != nil || len(huge) != 5 {
		t.Fatalf("all layers, huge K: %v %v", huge, err)
	}
	a, _ := os.ReadFile(p("a.gguf"))
	b, _ := os.ReadFile(p("b.gguf"))
	if !bytes.Equal(a, b) {
		t.Fatal("clamping at 1e6 σ changed the output")
	}
	reps, err := QuantizeClamped(src, p("c.gguf"), gguf.Q4_0, 3, map[int]bool{1: true, 3: true})
	if err != nil || len(reps) != 2 || reps[0].Layer != 1 || reps[1].Layer != 3 {
		t.Fatalf("layers 1, 3: %+v %v", reps, err)
	}
	eng, err := native.Load(src, native.Options{Threads: 1, NoVocab: true, ExtraSets: []string{p("c.gguf")}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for _, r := range reps {
		s, err := sampleLayer(&eng.SetWeights(0).Layers[r.Layer])
		if err != nil {
			t.Fatal(err)
		}
		// the F32 layer has fewer than 2^20 weights: the sample is all of them
		beyond := int64(math.Round(shareAbove(s.abs, r.Threshold) * float64(len(s.abs))))
		if s.n != r.Total || beyond != r.Clamped || math.Abs(s.sigma-r.Sigma) > 1e-6*r.Sigma || r.Clamped == 0 {
			t.Fatalf("layer %d: %+v, want %d weights, %d beyond 3σ (σ %v)", r.Layer, r, s.n, beyond, s.sigma)
		}
	}
	if _, err := QuantizeClamped(src, p("d.gguf"), gguf.Type(9999), 3, nil); err == nil {
		t.Fatal("bad type accepted")
	}
	if _, err := os.Stat(p("d.gguf")); err == nil {
		t.Fatal("a failed run left its output")
	}
}
