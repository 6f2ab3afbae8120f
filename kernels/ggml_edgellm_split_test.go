package kernels

import (
	"math"
	"testing"
)

// TestMulMatEdgellmSplitRepeated: the plain ops' threads share the rows
// through the node's split state (many ~64 KB chunks per thread here):
// run after run of one graph at 2 and 3 threads, each output is bitwise the
// 1-thread graph's, for every plain type and n = 1..EdgellmMaxN (9: two
// passes over each chunk). A state left dirty by one run would lose rows in the next.
func TestMulMatEdgellmSplitRepeated(t *testing.T) {
	const rows, k = 601, 1024
	for _, wt := range []GGMLType{GGMLTypeQ8_0, GGMLTypeQ4_0, GGMLTypeF32, GGMLTypeF16} {
		var w []byte
		var x []float32
		if wt == GGMLTypeF32 || wt == GGMLTypeF16 {
			w, _, x = floatProblem(wt, rows, k, 5)
		} else {
			w, x = edgellmProblem(t, wt, rows, k, 5)
		}
		for _, n := range []int{1, 2, 4, 5, 8, EdgellmMaxN} {
			ref := newMMGraph(t, wt, w, rows, k, n, 1, true)
			for threads := 2; threads <= 3; threads++ {
				g := newMMGraph(t, wt, w, rows, k, n, threads, true)
				for run := 0; run < 4; run++ {
					xr := make([]float32, n*k) // a different batch each run
					for i := range xr {
						xr[i] = x[(i+run*k)%len(x)]
					}
					want := append([]float32(nil), ref.run(t, xr)...)
					got := g.run(t, xr)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s n=%d threads=%d run %d: output %d %g, 1-thread graph %g", wt, n, threads, run, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
