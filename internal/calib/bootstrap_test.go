package calib

import "testing"

// TestBootstrapInterval: paired over the same resampled blocks, a
// difference that is the same in every block has a zero-width interval
// (below zero when negative); one that changes sign between blocks gives an
// interval that straddles zero ("within noise"); and Holds counts only
// differences below zero beyond the interval.
func TestBootstrapInterval(t *testing.T) {
	sizes := []float64{32, 32, 32, 32, 32, 32, 32, 32}
	bs := newBootstrap(sizes, BootstrapReps, 1)
	base := []float64{3.2, 1.6, 6.4, 3.2, 2.4, 4.8, 1.6, 3.2}
	shifted := make([]float64, len(base))
	noisy := make([]float64, len(base))
	for i, v := range base {
		shifted[i] = v - 0.32 // KL 0.01 lower per position in every block
		noisy[i] = v + []float64{-1, 1}[i%2]*0.64
	}
	mb, ms, mn := bs.means(base), bs.means(shifted), bs.means(noisy)
	iv := interval(-0.01, ms, mb)
	if !iv.Below() || iv.Hi > -0.01+1e-12 || iv.Lo < -0.01-1e-12 {
		t.Fatalf("constant shift: %v", iv)
	}
	nv := interval(0, mn, mb)
	if nv.Below() || !(nv.Lo < 0 && nv.Hi > 0) {
		t.Fatalf("sign-changing difference: %v", nv)
	}
	p := &Proof{Points: []Point{{Budget: 5, EqualN: 3, VsMedian: iv}}}
	if ok, bad := p.Holds(); !ok {
		t.Fatalf("holds: %v", bad)
	}
	p.Points = append(p.Points, Point{Budget: 6, EqualN: 3, VsMedian: nv})
	if ok, bad := p.Holds(); ok || len(bad) != 1 || bad[0] != 6 {
		t.Fatalf("within noise counted as a win: %v %v", ok, bad)
	}
}
