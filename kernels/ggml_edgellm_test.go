package kernels

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/edgellm/edgellm/kernels/matvec"
)

// mmGraph is a one-matmul graph, w [k, rows] x x [k, n], computed by ggml's
// mul_mat or by MulMatEdgellm, on its own thread pool.
type mmGraph struct {
	ctx *GGMLContext
	ga  *Gallocr
	tp  *Threadpool
	be  *CPUBackend
	g   *Graph
	w   Tensor
	x   Tensor
	out Tensor
}

func newMMGraph(tb testing.TB, wt GGMLType, wbytes []byte, rows, k, n, threads int, own bool) *mmGraph {
	tb.Helper()
	m := &mmGraph{}
	var err error
	if m.ctx, err = NewGGMLContext(16, 16); err != nil {
		tb.Fatal(err)
	}
	m.ga, _ = NewGallocr()
	m.tp, _ = NewThreadpool(ThreadpoolParams{NThreads: threads})
	m.be, _ = NewCPUBackend(m.tp, 0)
	tb.Cleanup(func() { m.be.Close(); m.tp.Close(); m.ga.Close(); m.ctx.Close() })
	m.w, _ = m.ctx.NewTensor(wt, int64(k), int64(rows))
	m.w.SetInput()
	m.x, _ = m.ctx.NewTensor(GGMLTypeF32, int64(k), int64(n))
	m.x.SetInput()
	if own {
		m.out = m.ctx.MulMatEdgellm(m.w, m.x)
	} else {
		m.out = m.ctx.MulMat(m.w, m.x)
	}
	m.out.SetOutput()
	if m.g, err = m.ctx.NewGraph(16); err != nil {
		tb.Fatal(err)
	}
	if err := m.g.Expand(m.out); err != nil {
		tb.Fatal(err)
	}
	if err := m.ga.Alloc(m.g); err != nil {
		tb.Fatal(err)
	}
	copy(unsafe.Slice((*byte)(m.w.Data()), len(wbytes)), wbytes)
	return m
}

func (m *mmGraph) run(tb testing.TB, x []float32) []float32 {
	tb.Helper()
	copy(m.x.Float32s(), x)
	if err := m.be.Compute(m.g); err != nil {
		tb.Fatal(err)
	}
	return m.out.Float32s()
}

func edgellmProblem(tb testing.TB, wt GGMLType, rows, k int, seed int64) ([]byte, []float32) {
	rng := rand.New(rand.NewSource(seed))
	wf := make([]float32, rows*k)
	for i := range wf {
		wf[i] = float32(rng.NormFloat64())
	}
	sz, _ := QuantRowSize(uint32(wt), k)
	w := make([]byte, rows*sz)
	if _, err := QuantizeRows(uint32(wt), wf, w, rows, k); err != nil {
		tb.Fatal(err)
	}
	x := make([]float32, EdgellmMaxN*k)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
	}
	return w, x
}

// TestEdgellmActsMatchGGML: matvec's activation quantisation gives the bytes
// of ggml's Q8_0 quantisation (the vector operand of ggml's mul_mat).
func TestEdgellmActsMatchGGML(t *testing.T) {
	_, x := edgellmProblem(t, GGMLTypeQ8_0, 1, 512, 1)
	x = x[:matvec.MaxN*512]
	a, _ := matvec.NewActivations(512)
	if err := a.Set(x); err != nil {
		t.Fatal(err)
	}
	theirs := make([]byte, len(a.Bytes()))
	if _, err := QuantizeRows(uint32(GGMLTypeQ8_0), x, theirs, matvec.MaxN, 512); err != nil {
		t.Fatal(err)
	}
	for i := range theirs {
		if a.Bytes()[i] != theirs[i] {
			t.Fatalf("byte %d: ours %#x, ggml %#x", i, a.Bytes()[i], theirs[i])
		}
	}
}

// TestMulMatEdgellm: the custom op in a ggml graph (ggml's cast to Q8_0,
// ggml's thread pool splitting rows) gives exactly matvec.Mul's bits with
// the reference of the contract the op runs (it runs matvec.Best: C4's
// Scalar, or C8's Scalar8 on an arm64 CPU with i8mm), row j
// of an n-row graph (n = 1..EdgellmMaxN) is bitwise the 1-row graph for every n and thread
// count, and the result is within the derived tolerance of ggml's mul_mat.
func TestMulMatEdgellm(t *testing.T) {
	const rows, k = 67, 512 // odd rows: the row-pair tail and uneven splits
	for _, wt := range []GGMLType{GGMLTypeQ8_0, GGMLTypeQ4_0} {
		w, x := edgellmProblem(t, wt, rows, k, 2)
		single := make([][]float32, EdgellmMaxN)
		g1 := newMMGraph(t, wt, w, rows, k, 1, 1, true)
		if op := g1.out.OpName(); op != "CUSTOM" {
			t.Fatalf("%s: MulMatEdgellm built %s, want the custom op", wt, op)
		}
		a, _ := matvec.NewActivations(k)
		refImpl := matvec.Best().Reference()
		for j := range single {
			single[j] = append([]float32(nil), g1.run(t, x[j*k:(j+1)*k])...)
			_ = a.Set(x[j*k : (j+1)*k])
			want := make([]float32, rows)
			if err := matvec.Mul(refImpl, matvec.Type(wt), w, rows, a, want, 1); err != nil {
				t.Fatal(err)
			}
			for r := range want {
				if math.Float32bits(want[r]) != math.Float32bits(single[j][r]) {
					t.Fatalf("%s row %d act %d: graph %g, matvec %v %g", wt, r, j, single[j][r], refImpl, want[r])
				}
			}
		}
		for n := 1; n <= EdgellmMaxN; n++ {
			for threads := 1; threads <= 3; threads++ {
				own := newMMGraph(t, wt, w, rows, k, n, threads, true).run(t, x[:n*k])
				ref := newMMGraph(t, wt, w, rows, k, n, threads, false).run(t, x[:n*k])
				for j := 0; j < n; j++ {
					for r := 0; r < rows; r++ {
						got := own[j*rows+r]
						if math.Float32bits(got) != math.Float32bits(single[j][r]) {
							t.Fatalf("%s n=%d threads=%d row %d act %d: %g, 1-row graph %g", wt, n, threads, r, j, got, single[j][r])
						}
						// Both are sums of the same exact integer block dots
						// times the same f32 scales; they differ only in f32
						// rounding: (nb+4) roundings each of at most 2^-24 of
						// the sum of |terms|, bounded by k*max|w|*max|x|.
						if d, tol := math.Abs(float64(got-ref[j*rows+r])), edgellmTol(w, x, wt, r, j, k); d > tol {
							t.Fatalf("%s n=%d threads=%d row %d act %d: ours %g, ggml %g (|diff| %g > %g)", wt, n, threads, r, j, got, ref[j*rows+r], d, tol)
						}
					}
				}
			}
		}
	}
}

// edgellmTol bounds |ours - ggml| for output (r, j): both round each block's
// scale product once and accumulate nb terms plus a final sum in f32, so
// each is within (nb+4)*2^-24 of Σ|d_w d_a lane| of the exact value (ours
// under C4: the scale, nb fmas, 3 tree levels; under C8, the arm64 i8mm
// kernel's, one level fewer: nb+3, within it); twice
// that bounds their difference. Σ|d_w d_a lane| <= Σ_b |d_w| |d_a| Σ|q_w q_a|
// <= Σ_i |w_i| (|x_i| + d_a) with the dequantised values.
func edgellmTol(w []byte, x []float32, wt GGMLType, r, j, k int) float64 {
	nb := k / 32
	deq := make([]float32, k)
	sz, _ := QuantRowSize(uint32(wt), k)
	if err := DequantizeRow(wt, w[r*sz:(r+1)*sz], deq); err != nil {
		panic(err)
	}
	abs := 0.0
	for b := 0; b < nb; b++ {
		amax := 0.0
		for i := 0; i < 32; i++ {
			amax = math.Max(amax, math.Abs(float64(x[j*k+b*32+i])))
		}
		for i := 0; i < 32; i++ {
			abs += math.Abs(float64(deq[b*32+i])) * (math.Abs(float64(x[j*k+b*32+i])) + amax/127)
		}
	}
	return 2 * float64(nb+4) * math.Ldexp(1, -24) * abs * 1.01
}

// TestMulMatEdgellmFallsBack: what the kernels do not take goes to ggml's
// mul_mat (K-quant weights, batches above EdgellmMaxN).
func TestMulMatEdgellmFallsBack(t *testing.T) {
	ctx, _ := NewGGMLContext(16, 16)
	defer ctx.Close()
	wk, _ := ctx.NewTensor(GGMLTypeQ4_K, 256, 4)
	wf, _ := ctx.NewTensor(GGMLTypeF32, 256, 4)
	wq, _ := ctx.NewTensor(GGMLTypeQ8_0, 256, 4)
	x1, _ := ctx.NewTensor(GGMLTypeF32, 256, 1)
	x9, _ := ctx.NewTensor(GGMLTypeF32, 256, int64(EdgellmMaxN+1))
	for _, c := range []struct {
		w, x Tensor
		want bool
	}{{wq, x1, true}, {wf, x1, true}, {wk, x1, false}, {wq, x9, false}, {wf, x9, false}} {
		if got := EdgellmEligible(c.w, c.x); got != c.want {
			t.Errorf("%s x %d rows: eligible %v, want %v", c.w.Type(), c.x.Ne(1), got, c.want)
		}
	}
	if op := ctx.MulMatEdgellm(wk, x1).OpName(); op != "MUL_MAT" {
		t.Errorf("Q4_K weights: op %s, want MUL_MAT", op)
	}
	if op := ctx.MulMatEdgellm(wq, x9).OpName(); op != "MUL_MAT" {
		t.Errorf("%d rows: op %s, want MUL_MAT", EdgellmMaxN+1, op)
	}
}

// floatProblem makes rows x k weights of wt (F32, or F16 from random half
// bits) as bytes and exact values, and EdgellmMaxN activation rows.
func floatProblem(wt GGMLType, rows, k int, seed int64) ([]byte, []float64, []float32) {
	rng := rand.New(rand.NewSource(seed))
	vals := make([]float64, rows*k)
	var w []byte
	for i := range vals {
		v := float32(rng.NormFloat64())
		if wt == GGMLTypeF16 {
			h := uint16(rng.Intn(8)+11)<<10 | uint16(rng.Intn(1024)) | uint16(rng.Intn(2))<<15
			w = binary.LittleEndian.AppendUint16(w, h)
			e, m := int(h>>10)&0x1f, float64(h&0x3ff)
			vals[i] = math.Copysign((1+m/1024)*math.Ldexp(1, e-15), float64(1-2*int(h>>15)))
			continue
		}
		w = binary.LittleEndian.AppendUint32(w, math.Float32bits(v))
		vals[i] = float64(v)
	}
	x := make([]float32, EdgellmMaxN*k)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
	}
	return w, vals, x
}

// TestMulMatEdgellmFloat: for F32 and F16 weights the custom op (no cast
// node) gives matvec.MulFloat's scalar bits, row j of an n-row graph is
// bitwise the 1-row graph for every n and thread count, and the result is
// within the derived tolerance of ggml's mul_mat. It logs how many rows of
// ggml's own mul_mat differ from its 1-row result (the reason for the
// kernels: ggml's F32 mul_mat takes another path for n >= 2).
func TestMulMatEdgellmFloat(t *testing.T) {
	// 64 x 192: stories260K's FFN shape, where ggml's F32 mul_mat takes
	// another path for n >= 2; 67 x 200: the row-pair tail, uneven splits
	// and a k that ends in a masked chunk.
	for _, c := range []struct {
		wt      GGMLType
		rows, k int
	}{{GGMLTypeF32, 64, 192}, {GGMLTypeF16, 64, 192}, {GGMLTypeF32, 67, 200}, {GGMLTypeF16, 67, 200}} {
		wt, rows, k := c.wt, c.rows, c.k
		w, vals, x := floatProblem(wt, rows, k, 3)
		g1 := newMMGraph(t, wt, w, rows, k, 1, 1, true)
		if op := g1.out.OpName(); op != "CUSTOM" || g1.g.CountOps("CPY") != 0 {
			t.Fatalf("%s: MulMatEdgellm built %s with %d casts, want the custom op alone", wt, op, g1.g.CountOps("CPY"))
		}
		ggml1 := newMMGraph(t, wt, w, rows, k, 1, 1, false)
		single := make([][]float32, EdgellmMaxN)
		ggmlSingle := make([][]float32, EdgellmMaxN)
		for j := range single {
			single[j] = append([]float32(nil), g1.run(t, x[j*k:(j+1)*k])...)
			ggmlSingle[j] = append([]float32(nil), ggml1.run(t, x[j*k:(j+1)*k])...)
			want := make([]float32, rows)
			if err := matvec.MulFloat(matvec.Scalar, matvec.Type(wt), w, rows, k, x[j*k:(j+1)*k], want, 1); err != nil {
				t.Fatal(err)
			}
			for r := range want {
				if math.Float32bits(want[r]) != math.Float32bits(single[j][r]) {
					t.Fatalf("%s row %d act %d: graph %g, matvec scalar %g", wt, r, j, single[j][r], want[r])
				}
			}
		}
		ggmlDiff := 0
		for n := 1; n <= EdgellmMaxN; n++ {
			for threads := 1; threads <= 3; threads++ {
				own := newMMGraph(t, wt, w, rows, k, n, threads, true).run(t, x[:n*k])
				ref := newMMGraph(t, wt, w, rows, k, n, threads, false).run(t, x[:n*k])
				for j := 0; j < n; j++ {
					for r := 0; r < rows; r++ {
						got := own[j*rows+r]
						if math.Float32bits(got) != math.Float32bits(single[j][r]) {
							t.Fatalf("%s n=%d threads=%d row %d act %d: %g, 1-row graph %g", wt, n, threads, r, j, got, single[j][r])
						}
						if math.Float32bits(ref[j*rows+r]) != math.Float32bits(ggmlSingle[j][r]) {
							ggmlDiff++
						}
						// Either sum is within gamma(k) = k*u/(1-k*u) (u =
						// 2^-24; any summation order) of sum|w x| from the
						// exact value; ggml's F16 path also rounds x to F16
						// (relative 2^-11 per element).
						abs := 0.0
						for i := 0; i < k; i++ {
							abs += math.Abs(vals[r*k+i] * float64(x[j*k+i]))
						}
						ku := float64(k) * math.Ldexp(1, -24)
						tol := 2 * ku / (1 - ku) * abs
						if wt == GGMLTypeF16 {
							tol += math.Ldexp(1, -11) * abs * 1.01
						}
						if d := math.Abs(float64(got - ref[j*rows+r])); d > tol {
							t.Fatalf("%s n=%d threads=%d row %d act %d: ours %g, ggml %g (|diff| %g > %g)", wt, n, threads, r, j, got, ref[j*rows+r], d, tol)
						}
					}
				}
			}
		}
		t.Logf("%s %dx%d: ggml's mul_mat differs from its 1-row result in %d outputs (n = 1..%d, 1-3 threads); ours in none", wt, rows, k, ggmlDiff, EdgellmMaxN)
	}
}
