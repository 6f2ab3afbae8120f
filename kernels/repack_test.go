package kernels

import (
	"errors"
	"math"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
// the activations to Q8_0 with the same scale formula (ggml's x86
// repack.cpp mirrors quantize_row_q8_0 on purpose) and take the same
// integer block dot products; they
// differ in how the K/32 per-block float terms t_b = d_w·d_x·Σ are rounded
// and summed (8 rows interleaved, other accumulators). Reordering a float32
// sum of n terms moves it by at most (n-1)·2⁻²⁴·Σ|t_b|, and one more
// rounding per term adds 2⁻²⁴·Σ|t_b|: with n = 8 the bound is 8·2⁻²⁴·Σ|t_b|.
// Σ|t_b| ≤ Σ_i |ŵ_i|·|x̂_i| over the dequantized values, which exceed the
// float inputs by at most one quantization step each; the test bounds it by
// 2·Σ_i |w_i|·|x_i| and so allows 16·2⁻²⁴·Σ_i |w_i|·|x_i| per output.
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
		for j := 0; j < int(cols); j++ {
			for i := 0; i < m; i++ {
				var sum float64 // Σ |w|·|x| of output (i, j)
				for x := 0; x < k; x++ {
					sum += math.Abs(float64(W[i*k+x])) * math.Abs(float64(X[j*k+x]))
				}
				o := j*m + i
				d := math.Abs(float64(A[o] - B[o]))
				worst = max(worst, d/sum)
				if d > 16*math.Pow(2, -24)*sum || math.IsNaN(d) {
					t.Fatalf("cols %d: out[%d,%d] plain %v repacked %v (Σ|w||x| %.3g)", cols, i, j, A[o], B[o], sum)
				}
			}
		}
		t.Logf("cols %d: max |plain - repacked| / Σ|w||x| = %.3g (bound %.3g)", cols, worst, 16*math.Pow(2, -24))
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

// vmaFlags returns the VmFlags line of the mapping in /proc/self/smaps that
// contains addr.
func vmaFlags(t *testing.T, addr uintptr) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, ok := strings.Cut(f[0], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			z, err2 := strconv.ParseUint(hi, 16, 64)
			in = ok && err1 == nil && err2 == nil && uint64(addr) >= a && uint64(addr) < z
			continue
		}
		if in && len(f) > 0 && f[0] == "VmFlags:" {
			return line
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps contains %#x", addr)
	return ""
}

// TestRepackHugePages: a repack buffer's 2 MiB-aligned interior is advised
// MADV_HUGEPAGE (the mapping's VmFlags carry "hg"), unless
// SetRepackHugePages(false) (EDGELLM_REPACK_HUGEPAGES=0 in the CLI); a
// buffer below hugeMinBuffer is not (it may come from a malloc arena).
// Nothing is written to the buffers, so their 64 MiB are address space,
// not memory.
func TestRepackHugePages(t *testing.T) {
	requireRepack(t)
	thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Skipf("kernel without transparent huge pages: %v", err)
	}
	t.Logf("THP: %s", strings.TrimSpace(string(thp)))
	const size = 2 * hugeMinBuffer
	defer SetRepackHugePages(true)
	for _, env := range []string{"", "0"} {
		SetRepackHugePages(env != "0")
		b, err := NewRepackBuffer(size)
		if err != nil {
			t.Fatal(err)
		}
		mid := uintptr(b.base) + size/2
		flags := vmaFlags(t, mid)
		hg := strings.Contains(" "+flags+" ", " hg ")
		t.Logf("EDGELLM_REPACK_HUGEPAGES=%q: advised %d bytes; %s", env, b.HugePageBytes(), flags)
		if env == "" && (b.HugePageBytes() < size-2*hugePage || !hg) {
			t.Errorf("default: advised %d of %d bytes, VmFlags hg %v; want ≥ %d and hg", b.HugePageBytes(), size, hg, size-2*hugePage)
		}
		if env == "0" && (b.HugePageBytes() != 0 || hg) {
			t.Errorf("EDGELLM_REPACK_HUGEPAGES=0: advised %d bytes, hg %v; want none", b.HugePageBytes(), hg)
		}
		b.Close()
	}
	for _, n := range []int64{64 << 10, hugeMinBuffer - 1} {
		small, err := NewRepackBuffer(n)
		if err != nil {
			t.Fatal(err)
		}
		if small.HugePageBytes() != 0 {
			t.Errorf("%d-byte buffer: advised %d bytes, want 0", n, small.HugePageBytes())
		}
		small.Close()
	}
}

// TestRepackTypes: the list run's "nothing to repack" line names is ggml's
// own answer: Q4_0 is in it wherever repacking is compiled in (every x86
// and ARM kernel set repacks it), Q8_0 and F32 are not.
func TestRepackTypes(t *testing.T) {
	if !RepackAvailable() {
		t.Skip("built without GGML_USE_CPU_REPACK")
	}
	got := RepackTypes()
	t.Logf("repacked types on this CPU: %v", got)
	if !slices.Contains(got, GGMLTypeQ4_0.String()) || slices.Contains(got, GGMLTypeQ8_0.String()) || slices.Contains(got, GGMLTypeF32.String()) {
		t.Fatalf("RepackTypes() = %v: want q4_0, not q8_0 or f32", got)
	}
}
