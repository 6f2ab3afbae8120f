package sharedtest

import "testing"

func TestCompareLogits(t *testing.T) {
	want := []float32{0, 10, 4, -2} // range 12: tolerance 0.12
	cases := []struct {
		name string
		got  []float32
		ok   bool
	}{
		{"equal", []float32{0, 10, 4, -2}, true},
		{"reordering noise", []float32{0.1, 9.9, 4.05, -2}, true},
		{"beyond 1% of the range", []float32{0.2, 10, 4, -2}, false},
		{"length", []float32{0, 10, 4}, false},
	}
	for _, c := range cases {
		if err := CompareLogits(c.got, want); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
		}
	}
	// A clear winner must stay the winner; a near tie may flip.
	if err := CompareLogits([]float32{0, 10, 10.04, 0}, []float32{0, 10, 9.95, 0}); err != nil {
		t.Errorf("near tie flipped within tolerance: %v", err)
	}
	if err := CompareLogits([]float32{0, 1, 1.05, 0}, []float32{0, 1.05, 0.95, 0}); err == nil {
		t.Error("top-1 flip of a clear winner accepted")
	}
}
