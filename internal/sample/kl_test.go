package sample

import (
	"math"
	"testing"
)

func TestKL(t *testing.T) {
	p := []float32{1, 2, 3}
	if kl := KL(p, p); kl != 0 {
		t.Fatalf("KL(p‖p) = %g", kl)
	}
	// Shifting logits does not change the distribution.
	if kl := KL(p, []float32{11, 12, 13}); kl > 1e-12 {
		t.Fatalf("KL of shifted logits = %g", kl)
	}
	// Two-point distributions: closed form.
	a, b := []float32{0, 0}, []float32{0, float32(math.Log(3))} // (1/2, 1/2) vs (1/4, 3/4)
	want := 0.5*math.Log(0.5/0.25) + 0.5*math.Log(0.5/0.75)
	if kl := KL(a, b); math.Abs(kl-want) > 1e-7 {
		t.Fatalf("KL = %.9f, want %.9f", kl, want)
	}
	if lse := LogSumExp([]float32{1000, 1000}); math.Abs(lse-(1000+math.Ln2)) > 1e-9 {
		t.Fatalf("LogSumExp overflowed: %g", lse)
	}
}
