package specmodel

import (
	"math"
	"testing"
)

func TestVerify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		verify []float32
		n      int
		want   float64
	}{
		{"none: v(n) = n", nil, 3, 3},
		{"below 1", []float32{1}, 0, 0},
		{"measured", []float32{1, 1.2, 1.5}, 2, 1.2},
		{"only v(1): slope 1", []float32{1, 0, 0}, 3, 3},
		{"extrapolated from v(2), v(3)", []float32{1, 1.2, 1.5, 0, 0}, 5, 2.1},
		{"gap: slope over the gap", []float32{1, 0, 1.4, 0}, 4, 1.6},
		{"past the slice", []float32{1, 1.1}, 4, 1.3},
		{"falling costs clamp the slope at 0", []float32{1, 0.9, 0}, 3, 0.9},
	} {
		if got := Verify(tc.verify, tc.n); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s: Verify(%v, %d) = %v, want %v", tc.name, tc.verify, tc.n, got, tc.want)
		}
	}
}

func TestExpectedRate(t *testing.T) {
	v := []float32{1, 1.2, 1.4, 1.6, 1.8}
	for _, tc := range []struct {
		name   string
		accept []float32
		c      float32
		k      int
		want   float64
	}{
		{"k = 0 is plain decoding", []float32{0.9}, 0.1, 0, 1},
		{"k = 1", []float32{0.5}, 0.1, 1, 1.5 / (0.1 + 1.2)},
		{"k = 2", []float32{0.8, 0.5}, 0.1, 2, (1 + 0.8 + 0.4) / (0.2 + 1.4)},
		{"unmeasured position takes the last", []float32{0.8, 0, 0}, 0.1, 3, (1 + 0.8 + 0.64 + 0.512) / (0.3 + 1.6)},
		{"nothing accepted", []float32{0, 0}, 0.1, 2, 1 / (0.2 + 1.4)},
	} {
		if got := ExpectedRate(tc.accept, tc.c, v, tc.k); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s: ExpectedRate = %v, want %v", tc.name, got, tc.want)
		}
	}
}
