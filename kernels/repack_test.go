package kernels

import (
	"errors"
	"math"
	"math/rand"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// requireRepack skips when this CPU has no repacked Q4_0 kernel (ggml's
// q4_0_8x8 needs AVX2 on x86-64) and fails when the build lacks CPU_REPACK:
// the Makefile defines GGML_USE_CPU_REPACK by default.
func requireRepack(t *testing.T) {
	t.Helper()
	if !RepackAvailable() {
		t.Fatal("RepackAvailable false: the build must define GGML_USE_CPU_REPACK (eval \"$(make -s env)\")")
	}
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 {
		t.Skip("no AVX2: ggml has no repacked Q4_0 kernel on this CPU")
	}
}

func TestRepackEligible(t *testing.T) {
	requireRepack(t)
	tests := []struct {
		name     string
		typ      GGMLType
		ne0, ne1 int64
		want     bool
	}{
		{"q4_0", GGMLTypeQ4_0, 256, 64, true},
		{"q4_0 rows not a multiple of 8", GGMLTypeQ4_0, 256, 12, false},
		{"q4_k", GGMLTypeQ4_K, 256, 64, true},
		{"q8_0 (no repacked kernel in this ggml)", GGMLTypeQ8_0, 256, 64, false},
		{"f32", GGMLTypeF32, 256, 64, false},
		{"f16", GGMLTypeF16, 256, 64, false},
		{"row not a whole block", GGMLTypeQ4_0, 48, 64, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RepackEligible(tc.typ, tc.ne0, tc.ne1); got != tc.want {
				t.Errorf("RepackEligible(%s, %d, %d) = %v, want %v", tc.typ, tc.ne0, tc.ne1, got, tc.want)
			}
		})
	}
}

// TestRepackMulMat multiplies activations by one Q4_0 matrix placed twice:
// in a plain CPU buffer and repacked (SetRepacked). Both kernels quantize
// the activations to Q8_0 with the same rounding and take the same integer
// block dot products; they differ only in the order the per-block float
// products d_w·d_x·Σ are summed (8 rows interleaved, several accumulators).
// Each output is a sum of K/32 block terms, so the float32 reordering error
// is at most (K/32)·2⁻²⁴·Σ|term| ≤ 8·2⁻²⁴·Σ|term| for K = 256, far below
// the bound used: 1e-5 relative to Σ|term|'s scale, which is ≈ |w|·|x|
// (bounded here by √K·max|w|·max|x| per row: the test's rows are N(0,1)).
func TestRepackMulMat(t *testing.T) {
	requireRepack(t)
	const k, m, n = 256, 64, 5 // n > 1: the gemm path (prefill); column 0 alone is gemv
	r := rand.New(rand.NewSource(7))
	W := make([]float32, k*m)
	randFill(r, W)
	q := make([]byte, m*int(GGMLTypeQ4_0.RowSize(k)))
	if _, err := QuantizeRows(uint32(GGMLTypeQ4_0), W, q, m, k); err != nil {
		t.Fatal(err)
	}
	for _, cols := range []int64{1, n} {
		f := newGGMLFixture(t, 2)
		plain := mustTensor(t, f.ctx, GGMLTypeQ4_0, k, m)
		packed := mustTensor(t, f.ctx, GGMLTypeQ4_0, k, m)
		pbuf, err := NewCPUBuffer(int64(len(q)))
		if err != nil {
			t.Fatal(err)
		}
		defer pbuf.Close()
		if err := pbuf.Place(plain, 0); err != nil {
			t.Fatal(err)
		}
		copy(unsafe.Slice((*byte)(plain.Data()), len(q)), q)
		rbuf, err := NewRepackBuffer(int64(len(q)))
		if err != nil {
			t.Fatal(err)
		}
		defer rbuf.Close()
		if err := rbuf.SetRepacked(packed, 0, unsafe.Pointer(&q[0])); err != nil {
			t.Fatal(err)
		}
		if !packed.Repacked() || plain.Repacked() {
			t.Fatalf("Repacked: packed %v plain %v", packed.Repacked(), plain.Repacked())
		}
		x := mustTensor(t, f.ctx, GGMLTypeF32, k, cols)
		a, b := f.ctx.MulMat(plain, x), f.ctx.MulMat(packed, x)
		X := make([]float32, k*int(cols))
		randFill(r, X)
		f.compute(t, func() { copy(x.Float32s(), X) }, a, b)
		A, B := a.Float32s(), b.Float32s()
		var worst float64
		for i := range A {
			d := math.Abs(float64(A[i] - B[i]))
			worst = max(worst, d)
			if d > 1e-5*math.Sqrt(k)*4*4 || math.IsNaN(d) {
				t.Fatalf("cols %d: out[%d] plain %v repacked %v", cols, i, A[i], B[i])
			}
		}
		t.Logf("cols %d: max |plain - repacked| = %.3g", cols, worst)
	}
}

func TestRepackBadInput(t *testing.T) {
	requireRepack(t)
	ctx, err := NewGGMLContext(4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	f32 := mustTensor(t, ctx, GGMLTypeF32, 256, 64)
	buf, err := NewRepackBuffer(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	src := make([]byte, 1<<20)
	if err := buf.SetRepacked(f32, 0, unsafe.Pointer(&src[0])); err == nil || !errors.Is(err, ErrGGML) {
		t.Errorf("SetRepacked(F32) = %v, want an ErrGGML", err)
	}
	plain, err := NewCPUBuffer(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	q := mustTensor(t, ctx, GGMLTypeQ4_0, 256, 64)
	if err := plain.SetRepacked(q, 0, unsafe.Pointer(&src[0])); err == nil {
		t.Error("SetRepacked into a plain CPU buffer succeeded")
	}
	if _, err := NewRepackBuffer(0); err == nil {
		t.Error("NewRepackBuffer(0) succeeded")
	}
}
