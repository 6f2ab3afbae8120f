package kernels

import (
	"errors"
	"math"
	"math/rand"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ggmlFixture is a metadata context, a graph allocator and a backend.
type ggmlFixture struct {
	ctx *GGMLContext
	ga  *Gallocr
	be  *CPUBackend
	tp  *Threadpool
}

func newGGMLFixture(t *testing.T, threads int) *ggmlFixture {
	t.Helper()
	ctx, err := NewGGMLContext(256, 256)
	if err != nil {
		t.Fatal(err)
	}
	ga, err := NewGallocr()
	if err != nil {
		t.Fatal(err)
	}
	tp, err := NewThreadpool(ThreadpoolParams{NThreads: threads})
	if err != nil {
		t.Fatal(err)
	}
	be, err := NewCPUBackend(tp, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := &ggmlFixture{ctx: ctx, ga: ga, be: be, tp: tp}
	t.Cleanup(func() { f.be.Close(); f.tp.Close(); f.ga.Close(); f.ctx.Close() })
	return f
}

func mustTensor(t *testing.T, c *GGMLContext, typ GGMLType, ne ...int64) Tensor {
	t.Helper()
	x, err := c.NewTensor(typ, ne...)
	if err != nil {
		t.Fatal(err)
	}
	x.SetInput()
	return x
}

// compute builds the graph of out, allocates it and runs it.
func (f *ggmlFixture) compute(t *testing.T, fill func(), outs ...Tensor) *Graph {
	t.Helper()
	if err := f.ctx.Err(); err != nil {
		t.Fatal(err)
	}
	g, err := f.ctx.NewGraph(256)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		o.SetOutput()
		if err := g.Expand(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.ga.Alloc(g); err != nil {
		t.Fatal(err)
	}
	fill()
	if err := f.be.Compute(g); err != nil {
		t.Fatal(err)
	}
	return g
}

func randFill(r *rand.Rand, s []float32) {
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
}

func TestGGMLMulMatRMSNorm(t *testing.T) {
	f := newGGMLFixture(t, 2)
	const k, m, n = 64, 5, 3
	a := mustTensor(t, f.ctx, GGMLTypeF32, k, m)
	b := mustTensor(t, f.ctx, GGMLTypeF32, k, n)
	mm := f.ctx.MulMat(a, b)          // [m, n]
	nrm := f.ctx.RMSNorm(b, 1e-5)     // [k, n]
	sw := f.ctx.SwiGLUSplit(nrm, nrm) // silu(x)*x
	r := rand.New(rand.NewSource(1))
	// Inputs may be overwritten in place by later nodes (gallocr reuses an
	// input's memory after its last use), so keep copies.
	A, B := make([]float32, k*m), make([]float32, k*n)
	f.compute(t, func() {
		randFill(r, A)
		randFill(r, B)
		copy(a.Float32s(), A)
		copy(b.Float32s(), B)
	}, mm, sw)
	MM, SW := mm.Float32s(), sw.Float32s()
	if mm.Ne(0) != m || mm.Ne(1) != n {
		t.Fatalf("mul_mat shape %v", shape(mm))
	}
	for j := 0; j < n; j++ {
		var ss float64
		for x := 0; x < k; x++ {
			ss += float64(B[j*k+x]) * float64(B[j*k+x])
		}
		scale := 1 / math.Sqrt(ss/k+1e-5)
		for i := 0; i < m; i++ {
			var d float64
			for x := 0; x < k; x++ {
				d += float64(A[i*k+x]) * float64(B[j*k+x])
			}
			if math.Abs(d-float64(MM[j*m+i])) > 1e-3 {
				t.Fatalf("mul_mat[%d,%d] = %v, want %v", i, j, MM[j*m+i], d)
			}
		}
		for x := 0; x < k; x++ {
			v := float64(B[j*k+x]) * scale
			want := v / (1 + math.Exp(-v)) * v
			if math.Abs(want-float64(SW[j*k+x])) > 1e-3 {
				t.Fatalf("swiglu(rms_norm)[%d,%d] = %v, want %v", x, j, SW[j*k+x], want)
			}
		}
	}
}

// TestGGMLSetRowsIntoMappedBuffer stores rows into a tensor placed in
// caller-owned (mmap'd) memory, as the KV arena does, quantizing to Q8_0.
func TestGGMLSetRowsIntoMappedBuffer(t *testing.T) {
	mem, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	buf, err := NewBufferFromPtr(unsafe.Pointer(&mem[0]), int64(len(mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	for _, typ := range []GGMLType{GGMLTypeF16, GGMLTypeQ8_0, GGMLTypeQ4_0} {
		t.Run(typ.String(), func(t *testing.T) {
			f := newGGMLFixture(t, 1)
			const width, slots = 64, 16
			kv, err := f.ctx.NewTensor(typ, width, slots)
			if err != nil {
				t.Fatal(err)
			}
			if err := buf.Place(kv, 4096); err != nil {
				t.Fatal(err)
			}
			if err := buf.Place(kv, 0); err == nil {
				t.Fatal("placing a tensor twice succeeded")
			}
			src := mustTensor(t, f.ctx, GGMLTypeF32, width, 2)
			idx := mustTensor(t, f.ctx, GGMLTypeI64, 2)
			st := f.ctx.SetRows(kv, src, idx)
			deq := f.ctx.Cast(f.ctx.View(kv, kv.Nb(1)*3, []int64{width, 2}, []int64{kv.Nb(1) * 4}), GGMLTypeF32) // rows 3 and 7
			r := rand.New(rand.NewSource(2))
			g, err := f.ctx.NewGraph(64)
			if err != nil {
				t.Fatal(err)
			}
			g.Expand(st)
			deq.SetOutput()
			g.Expand(deq)
			if err := f.ga.Alloc(g); err != nil {
				t.Fatal(err)
			}
			S := make([]float32, width*2)
			randFill(r, S)
			copy(src.Float32s(), S)
			copy(idx.Int64s(), []int64{3, 7})
			if err := f.be.Compute(g); err != nil {
				t.Fatal(err)
			}
			tol := map[GGMLType]float64{GGMLTypeF16: 0.002, GGMLTypeQ8_0: 0.03, GGMLTypeQ4_0: 0.35}[typ]
			D := deq.Float32s()
			for i := range S {
				if math.Abs(float64(S[i]-D[i])) > tol {
					t.Fatalf("element %d: stored %v, read back %v (tol %v)", i, S[i], D[i], tol)
				}
			}
			// The data went into the mapping at the placed offset.
			if uintptr(kv.Data()) != uintptr(unsafe.Pointer(&mem[4096])) {
				t.Fatalf("tensor data %p, want %p", kv.Data(), &mem[4096])
			}
		})
	}
}

// TestGGMLFlashAttnMatchesSoftMax checks the fused and the classic attention
// paths agree (GQA, masked, F16 K/V).
func TestGGMLFlashAttnMatchesSoftMax(t *testing.T) {
	f := newGGMLFixture(t, 2)
	const hd, nh, nkvh, nt, nkv = 32, 4, 2, 3, 8
	c := f.ctx
	q := mustTensor(t, c, GGMLTypeF32, hd, nh, nt)
	k := mustTensor(t, c, GGMLTypeF16, hd, nkvh, nkv)
	v := mustTensor(t, c, GGMLTypeF16, hd, nkvh, nkv)
	mask := mustTensor(t, c, GGMLTypeF16, nkv, nt)
	qp := c.Permute(q, 0, 2, 1, 3) // [hd, nt, nh]
	kp := c.Permute(k, 0, 2, 1, 3) // [hd, nkv, nkvh]
	vp := c.Permute(v, 0, 2, 1, 3)
	scale := float32(1 / math.Sqrt(hd))
	fa := c.FlashAttnExt(qp, kp, vp, mask, scale)
	c.SetPrecF32(fa)
	fa = c.Reshape(fa, hd*nh, nt)
	kq := c.MulMat(kp, qp) // [nkv, nt, nh]
	kq = c.SoftMaxExt(kq, mask, scale)
	vt := c.Cont(c.Transpose(c.Cast(vp, GGMLTypeF32))) // [nkv, hd, nkvh]
	kqv := c.MulMat(vt, kq)                            // [hd, nt, nh]
	cl := c.Cont(c.Permute(kqv, 0, 2, 1, 3), hd*nh, nt)
	r := rand.New(rand.NewSource(3))
	f.compute(t, func() {
		randFill(r, q.Float32s())
		tmp := make([]float32, hd*nkvh*nkv)
		randFill(r, tmp)
		FP32ToFP16Row(tmp, k.Uint16s())
		randFill(r, tmp)
		FP32ToFP16Row(tmp, v.Uint16s())
		m := mask.Uint16s()
		for i := 0; i < nt; i++ { // causal over the last nt slots
			for j := 0; j < nkv; j++ {
				m[i*nkv+j] = F16Zero
				if j > nkv-nt+i {
					m[i*nkv+j] = F16NegInf
				}
			}
		}
	}, fa, cl)
	A, B := fa.Float32s(), cl.Float32s()
	if len(A) != hd*nh*nt || len(A) != len(B) {
		t.Fatalf("sizes %d %d", len(A), len(B))
	}
	for i := range A {
		if math.Abs(float64(A[i]-B[i])) > 2e-3 {
			t.Fatalf("element %d: flash %v, classic %v", i, A[i], B[i])
		}
	}
}

func TestGGMLBadShapesAreErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(c *GGMLContext, a, b Tensor) Tensor
	}{
		{"mul_mat", func(c *GGMLContext, a, b Tensor) Tensor { return c.MulMat(a, b) }},
		{"reshape", func(c *GGMLContext, a, b Tensor) Tensor { return c.Reshape(a, 7) }},
		{"view", func(c *GGMLContext, a, b Tensor) Tensor { return c.View(a, 0, []int64{64, 4}, []int64{256}) }},
		{"add", func(c *GGMLContext, a, b Tensor) Tensor { return c.Add(b, a) }},
		{"get_rows", func(c *GGMLContext, a, b Tensor) Tensor { return c.GetRows(a, b) }},
		{"set_rows", func(c *GGMLContext, a, b Tensor) Tensor { return c.SetRows(a, b, b) }},
		{"permute", func(c *GGMLContext, a, b Tensor) Tensor { return c.Permute(a, 0, 0, 1, 2) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewGGMLContext(16, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			a, _ := c.NewTensor(GGMLTypeF32, 64, 3)
			b, _ := c.NewTensor(GGMLTypeF32, 32, 2)
			if out := tc.build(c, a, b); !out.Nil() {
				t.Fatal("bad op returned a tensor")
			}
			if !errors.Is(c.Err(), ErrGGML) {
				t.Fatalf("Err() = %v, want an ErrGGML", c.Err())
			}
			// Sticky: later ops return nothing.
			if out := c.Add(a, a); !out.Nil() {
				t.Fatal("op after an error returned a tensor")
			}
		})
	}
	c, _ := NewGGMLContext(2, 0)
	defer c.Close()
	if _, err := c.NewTensor(GGMLTypeQ4_0, 33); err == nil {
		t.Fatal("Q4_0 row of 33 accepted")
	}
	c.NewTensor(GGMLTypeF32, 1)
	c.NewTensor(GGMLTypeF32, 1)
	if _, err := c.NewTensor(GGMLTypeF32, 1); err == nil {
		t.Fatal("context overflow not reported")
	}
}

func TestGGMLComputeDoesNotAllocate(t *testing.T) {
	f := newGGMLFixture(t, 1)
	a := mustTensor(t, f.ctx, GGMLTypeF32, 32, 4)
	out := f.ctx.RMSNorm(a, 1e-5)
	g := f.compute(t, func() {}, out)
	if n := testing.AllocsPerRun(20, func() { f.be.Compute(g) }); n != 0 {
		t.Fatalf("Compute allocates %v times", n)
	}
}

func TestGGMLTypes(t *testing.T) {
	tests := []struct {
		typ       GGMLType
		name      string
		block     int64
		row32     int64
		quantized bool
		matmul    bool
	}{
		{GGMLTypeF32, "f32", 1, 128, false, true},
		{GGMLTypeF16, "f16", 1, 64, false, true},
		{GGMLTypeQ8_0, "q8_0", 32, 34, true, true},
		{GGMLTypeQ4_0, "q4_0", 32, 18, true, true},
		{GGMLTypeQ4_K, "q4_K", 256, 0, true, true},
		{GGMLTypeI32, "i32", 1, 128, false, false},
	}
	for _, tc := range tests {
		if tc.typ.String() != tc.name || tc.typ.BlockSize() != tc.block || tc.typ.Quantized() != tc.quantized || tc.typ.CPUMatMulOK() != tc.matmul {
			t.Errorf("%s: got %s block %d quantized %v matmul %v", tc.name, tc.typ, tc.typ.BlockSize(), tc.typ.Quantized(), tc.typ.CPUMatMulOK())
		}
		if tc.row32 > 0 && tc.typ.RowSize(32) != tc.row32 {
			t.Errorf("%s: RowSize(32) = %d, want %d", tc.name, tc.typ.RowSize(32), tc.row32)
		}
	}
	for _, bad := range []GGMLType{-1, 4, 31, 1000} {
		if bad.Valid() {
			t.Errorf("type %d valid", bad)
		}
	}
}
