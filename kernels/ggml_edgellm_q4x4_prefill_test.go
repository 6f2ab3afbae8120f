package kernels

import (
	"math"
	"math/rand"
	"testing"
)

// TestMulMatEdgellmQ4x4Prefill: batches above EdgellmMaxN (prefill) run
// the op on the q4x4 copy too (a CUSTOM node, no MUL_MAT), and every row
// of an n-row batch is bitwise the 1-row op's result on that row, for
// n = 16, 33, 64 and 1..3 threads.
func TestMulMatEdgellmQ4x4Prefill(t *testing.T) {
	if !EdgellmQ4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	const rows, k, maxN = 67, 512, 64
	wb, _ := edgellmProblem(t, GGMLTypeQ4_0, rows, k, 5)
	rng := rand.New(rand.NewSource(6))
	x := make([]float32, maxN*k)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
	}
	w, p, _ := placedQ4x4(t, wb, rows, k)
	run := func(n, threads int, xs []float32) []float32 {
		ctx, _ := NewGGMLContext(8, 8)
		defer ctx.Close()
		ga, _ := NewGallocr()
		defer ga.Close()
		tp, _ := NewThreadpool(ThreadpoolParams{NThreads: threads})
		defer tp.Close()
		be, _ := NewCPUBackend(tp, 0)
		defer be.Close()
		xt, _ := ctx.NewTensor(GGMLTypeF32, k, int64(n))
		xt.SetInput()
		out := ctx.MulMatEdgellmQ4x4(w, xt, p)
		out.SetOutput()
		g, _ := ctx.NewGraph(8)
		if err := g.Expand(out); err != nil {
			t.Fatal(err)
		}
		if c, m := g.CountOps("CUSTOM"), g.CountOps("MUL_MAT"); c != 1 || m != 0 {
			t.Fatalf("n=%d: %d CUSTOM and %d MUL_MAT nodes, want 1 and 0", n, c, m)
		}
		if err := ga.Alloc(g); err != nil {
			t.Fatal(err)
		}
		copy(xt.Float32s(), xs)
		if err := be.Compute(g); err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), out.Float32s()...)
	}
	single := make([][]float32, maxN)
	for j := range single {
		single[j] = run(1, 1, x[j*k:(j+1)*k])
	}
	for _, n := range []int{16, 33, 64} {
		for threads := 1; threads <= 3; threads++ {
			got := run(n, threads, x[:n*k])
			for j := 0; j < n; j++ {
				for r := 0; r < rows; r++ {
					if a, b := got[j*rows+r], single[j][r]; math.Float32bits(a) != math.Float32bits(b) {
						t.Fatalf("n=%d threads=%d row %d act %d: batch %g, single %g", n, threads, r, j, a, b)
					}
				}
			}
		}
	}
}
