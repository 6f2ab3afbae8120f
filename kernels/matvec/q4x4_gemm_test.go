package matvec

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// quantRows quantises the n rows of x (k each) one at a time into one
// buffer of n Q8_0 rows, and computes each row's single-row scalar
// reference product with w.
func quantRows(t testing.TB, w []byte, rows, k, n int, x []float32) ([]byte, [][]float32) {
	t.Helper()
	a, err := NewActivations(k)
	if err != nil {
		t.Fatal(err)
	}
	as := k / QK * ActBlockBytes
	act := make([]byte, n*as)
	single := make([][]float32, n)
	for j := 0; j < n; j++ {
		if err := a.Set(x[j*k : (j+1)*k]); err != nil {
			t.Fatal(err)
		}
		copy(act[j*as:], a.Bytes())
		single[j] = make([]float32, rows)
		if err := Mul(Scalar, Q4_0, w, rows, a, single[j], 1); err != nil {
			t.Fatal(err)
		}
	}
	return act, single
}

// TestQ4x4GemmBitwise: for batches above MaxN (prefill) the q4x4 kernel
// runs the tiled path, and every output is bitwise the single-row scalar
// reference (so a prefill row is the decode step's row), for many n, thread
// counts and shapes: rows not a multiple of 4 or 8, and k large enough that
// the activation rows span several tiles. The tiled kernel called directly
// (no fallback possible) gives the same bits, at n = 1..MaxN too.
func TestQ4x4GemmBitwise(t *testing.T) {
	if !Q4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	rng := rand.New(rand.NewSource(31))
	for _, sh := range []struct{ rows, k int }{{1, 32}, {7, 96}, {33, 320}, {70, 2048}, {21, 8192}} {
		w, _ := weights(rng, Q4_0, sh.rows, sh.k)
		p, err := PackQ4x4(w, sh.rows, sh.k)
		if err != nil {
			t.Fatal(err)
		}
		const maxN = 128
		x := activations(rng, maxN, sh.k)
		act, single := quantRows(t, w, sh.rows, sh.k, maxN, x)
		check := func(what string, n int, y []float32) {
			t.Helper()
			for j := 0; j < n; j++ {
				for r := 0; r < sh.rows; r++ {
					if got, want := math.Float32bits(y[j*sh.rows+r]), math.Float32bits(single[j][r]); got != want {
						t.Fatalf("%dx%d %s n=%d row %d act %d: %g (%#x), single-row scalar %g (%#x)",
							sh.rows, sh.k, what, n, r, j, y[j*sh.rows+r], got, single[j][r], want)
					}
				}
			}
		}
		for _, n := range []int{9, 16, 33, 64, 128} {
			for threads := 1; threads <= 3; threads++ {
				y := make([]float32, n*sh.rows)
				if err := MulQ4x4Rows(p, act, n, y, threads); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("threads=%d", threads), n, y)
			}
		}
		for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 33, 128} {
			if !q4x4AVX512Available() { // the tiled kernel is AVX-512 VNNI only
				break
			}
			y := make([]float32, n*sh.rows)
			if rc := q4x4GemmDirect(p, act, n, y); rc != 0 {
				t.Fatalf("emv_q4x4_gemm: %d", rc)
			}
			check("direct", n, y)
		}
	}
}

// TestQ4x4GemmDoesNotAllocate: a one-thread prefill-sized call allocates
// nothing in Go.
func TestQ4x4GemmDoesNotAllocate(t *testing.T) {
	if !Q4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	rng := rand.New(rand.NewSource(32))
	const rows, k, n = 64, 256, 32
	w, _ := weights(rng, Q4_0, rows, k)
	p, _ := PackQ4x4(w, rows, k)
	act, _ := quantRows(t, w, rows, k, n, activations(rng, n, k))
	y := make([]float32, n*rows)
	if a := testing.AllocsPerRun(20, func() { _ = MulQ4x4Rows(p, act, n, y, 1) }); a != 0 {
		t.Fatalf("%v allocations per call, want 0", a)
	}
}

// BenchmarkQ4x4Gemm: the tiled kernel ÷ the same kernel run 8 rows at a
// time (what n > 8 did before it), on one 1B-FFN-sized Q4_0 matrix (8192 x
// 2048), one thread, interleaved in one process, minimum of each (LOADED
// machines: the ratio is the figure).
func BenchmarkQ4x4Gemm(b *testing.B) {
	if !Q4x4Available() {
		b.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	rng := rand.New(rand.NewSource(33))
	const rows, k, n = 8192, 2048, 128
	w, _ := weights(rng, Q4_0, rows, k)
	p, _ := PackQ4x4(w, rows, k)
	a, _ := NewActivations(k)
	as := k / QK * ActBlockBytes
	act := make([]byte, n*as)
	x := activations(rng, n, k)
	for j := 0; j < n; j++ {
		_ = a.Set(x[j*k : (j+1)*k])
		copy(act[j*as:], a.Bytes())
	}
	y := make([]float32, n*rows)
	var tiled, by8 float64
	for i := 0; i < b.N; i++ {
		t0 := nowNs()
		_ = MulQ4x4Rows(p, act, n, y, 1)
		t1 := nowNs()
		for j := 0; j < n; j += MaxN {
			_ = MulQ4x4Rows(p, act[j*as:], MaxN, y[j*rows:], 1)
		}
		t2 := nowNs()
		if d := float64(t1 - t0); tiled == 0 || d < tiled {
			tiled = d
		}
		if d := float64(t2 - t1); by8 == 0 || d < by8 {
			by8 = d
		}
	}
	b.ReportMetric(2*float64(rows)*float64(k)*n/tiled, "GFLOP/s-tiled")
	b.ReportMetric(2*float64(rows)*float64(k)*n/by8, "GFLOP/s-by8")
	b.ReportMetric(by8/tiled, "speedup")
}
