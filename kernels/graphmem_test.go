package kernels

import "testing"

// TestGraphMemory on a chain with a residual and a view, counted by hand:
// x (input) → a = silu(x) → b = silu(a) → c = silu(b) → e = reshape(c) + x
// (output), each 1024 F32 = 4096 bytes. Keep everything: x, a, b, c, e =
// 20480 (the reshape is a view of c). Freed after the last use: x lives
// throughout (the residual), so at node 1 x, a and b are live: 12288. ggml's
// allocator needs no more than keep-everything.
func TestGraphMemory(t *testing.T) {
	f := newGGMLFixture(t, 1)
	c := f.ctx
	x := mustTensor(t, c, GGMLTypeF32, 1024)
	a := c.Silu(x)
	b := c.Silu(a)
	cc := c.Silu(b)
	e := c.Add(c.Reshape(cc, 32, 32), c.Reshape(x, 32, 32))
	e.SetOutput()
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	g, err := c.NewGraph(64)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Expand(e); err != nil {
		t.Fatal(err)
	}
	m := g.Memory()
	if m.KeepAll != 5*4096 || m.PeakLive != 3*4096 || m.Tensors != 5 {
		t.Fatalf("Memory() = %+v, want KeepAll 20480, PeakLive 12288, 5 tensors", m)
	}
	if err := f.ga.Reserve(g); err != nil {
		t.Fatal(err)
	}
	if buf := f.ga.BufferSize(); buf > m.KeepAll+1024 {
		t.Fatalf("ggml's allocator needs %d bytes, more than keeping everything (%d)", buf, m.KeepAll)
	} else {
		t.Logf("keep everything %d, peak live %d, ggml-alloc buffer %d", m.KeepAll, m.PeakLive, buf)
	}
}
