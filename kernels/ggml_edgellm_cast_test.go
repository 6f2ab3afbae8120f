package kernels

import (
	"math"
	"testing"
	"unsafe"
)

// TestMulMatEdgellmSharesCast: two edgellm matmuls of one input (q and k,
// gate and up) build one Q8_0 cast between them, a third of another input
// its own, and each result is bitwise the one-matmul graph's.
func TestMulMatEdgellmSharesCast(t *testing.T) {
	const rows, k, n = 64, 256, 3
	w1, x := edgellmProblem(t, GGMLTypeQ4_0, rows, k, 21)
	w2, _ := edgellmProblem(t, GGMLTypeQ4_0, rows, k, 22)
	ctx, err := NewGGMLContext(32, 32)
	if err != nil {
		t.Fatal(err)
	}
	ga, _ := NewGallocr()
	tp, _ := NewThreadpool(ThreadpoolParams{NThreads: 2})
	be, _ := NewCPUBackend(tp, 0)
	t.Cleanup(func() { be.Close(); tp.Close(); ga.Close(); ctx.Close() })
	wa, _ := ctx.NewTensor(GGMLTypeQ4_0, k, rows)
	wb, _ := ctx.NewTensor(GGMLTypeQ4_0, k, rows)
	xa, _ := ctx.NewTensor(GGMLTypeF32, k, n)
	xb, _ := ctx.NewTensor(GGMLTypeF32, k, n)
	for _, in := range []Tensor{wa, wb, xa, xb} {
		in.SetInput()
	}
	outs := []Tensor{ctx.MulMatEdgellm(wa, xa), ctx.MulMatEdgellm(wb, xa), ctx.MulMatEdgellm(wa, xb)}
	g, err := ctx.NewGraph(32)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		o.SetOutput()
		if err := g.Expand(o); err != nil {
			t.Fatal(err)
		}
	}
	if got := g.CountOps("CPY"); got != 2 {
		t.Fatalf("three matmuls of two inputs built %d casts, want 2", got)
	}
	if err := ga.Alloc(g); err != nil {
		t.Fatal(err)
	}
	copy(unsafe.Slice((*byte)(wa.Data()), len(w1)), w1)
	copy(unsafe.Slice((*byte)(wb.Data()), len(w2)), w2)
	copy(xa.Float32s(), x[:n*k])
	copy(xb.Float32s(), x[n*k:2*n*k])
	if err := be.Compute(g); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		w  []byte
		x0 int
	}{{w1, 0}, {w2, 0}, {w1, n * k}} {
		want := newMMGraph(t, GGMLTypeQ4_0, c.w, rows, k, n, 1, true).run(t, x[c.x0:c.x0+n*k])
		for j, v := range outs[i].Float32s() {
			if math.Float32bits(v) != math.Float32bits(want[j]) {
				t.Fatalf("matmul %d element %d: %g, alone %g", i, j, v, want[j])
			}
		}
	}
}
