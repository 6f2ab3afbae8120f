package matvec

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// TestQ4x4Bitwise: the q4x4 kernel on the interleaved copy gives bitwise
// the plain-block scalar reference, for every n, thread count and shape
// (rows not a multiple of 4 included) and row ranges [r0, r1) cutting
// groups (rows outside left alone), so row j of an n-row call is the
// single-row call and a graph may mix the two layouts.
func TestQ4x4Bitwise(t *testing.T) {
	if !Q4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	rng := rand.New(rand.NewSource(7))
	for _, sh := range append(shapes, struct{ rows, k int }{70, 2048}, struct{ rows, k int }{13, 64}) {
		w, _ := weights(rng, Q4_0, sh.rows, sh.k)
		p, err := PackQ4x4(w, sh.rows, sh.k)
		if err != nil {
			t.Fatal(err)
		}
		x := activations(rng, MaxN, sh.k)
		a, single := singleRows(t, Scalar, Q4_0, w, sh.rows, sh.k, x)
		for n := 1; n <= MaxN; n++ {
			_ = a.Set(x[:n*sh.k])
			check := func(what string, y []float32, r0, r1 int) {
				t.Helper()
				for j := 0; j < n; j++ {
					for r := r0; r < r1; r++ {
						if got, want := math.Float32bits(y[j*sh.rows+r]), math.Float32bits(single[j][r]); got != want {
							t.Fatalf("%dx%d n=%d %s row %d act %d: q4x4 (%v) %g (%#x), scalar %g (%#x)",
								sh.rows, sh.k, n, what, r, j, Q4x4Impl(), y[j*sh.rows+r], got, single[j][r], want)
						}
					}
				}
			}
			for threads := 1; threads <= 4; threads++ {
				y := make([]float32, n*sh.rows)
				if err := MulQ4x4(p, a, y, threads); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("threads=%d", threads), y, 0, sh.rows)
			}
			// Ranges that start and end inside groups: rows outside
			// [r0, r1) are left alone.
			for _, rr := range [][2]int{{1, sh.rows}, {0, sh.rows - 1}, {sh.rows / 3, sh.rows - sh.rows/5}, {sh.rows / 2, sh.rows/2 + 1}} {
				r0, r1 := rr[0], rr[1]
				if r0 >= r1 {
					continue
				}
				y := make([]float32, n*sh.rows)
				for i := range y {
					y[i] = -7
				}
				mulQ4x4Range(p, r0, r1, a, y)
				check(fmt.Sprintf("rows [%d,%d)", r0, r1), y, r0, r1)
				for j := 0; j < n; j++ {
					for r := 0; r < sh.rows; r++ {
						if (r < r0 || r >= r1) && y[j*sh.rows+r] != -7 {
							t.Fatalf("%dx%d n=%d rows [%d,%d): row %d act %d written", sh.rows, sh.k, n, r0, r1, r, j)
						}
					}
				}
			}
		}
	}
}

// TestQ4x4DoesNotAllocate: a one-thread call allocates nothing.
func TestQ4x4DoesNotAllocate(t *testing.T) {
	if !Q4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	rng := rand.New(rand.NewSource(8))
	w, _ := weights(rng, Q4_0, 64, 256)
	p, _ := PackQ4x4(w, 64, 256)
	a, _ := NewActivations(256)
	_ = a.Set(activations(rng, 4, 256))
	y := make([]float32, 4*64)
	if n := testing.AllocsPerRun(50, func() { _ = MulQ4x4(p, a, y, 1) }); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
}

// BenchmarkQ4x4VsPlain: the q4x4 kernel ÷ the plain-block AVX-512 kernel on
// one 1B-FFN-sized Q4_0 matrix (8192 x 2048, 9.4 MB), both timed in one
// process, interleaved, minimum of each (LOADED machines: the ratio is the
// figure, not the times).
func BenchmarkQ4x4VsPlain(b *testing.B) {
	if !Q4x4Available() {
		b.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	rng := rand.New(rand.NewSource(9))
	const rows, k = 8192, 2048
	w, _ := weights(rng, Q4_0, rows, k)
	p, _ := PackQ4x4(w, rows, k)
	a, _ := NewActivations(k)
	y := make([]float32, MaxN*rows)
	x := activations(rng, MaxN, k)
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			_ = a.Set(x[:n*k])
			var plain, ours float64
			for i := 0; i < b.N; i++ {
				t0 := nowNs()
				_ = Mul(best, Q4_0, w, rows, a, y, 1)
				t1 := nowNs()
				_ = MulQ4x4(p, a, y, 1)
				t2 := nowNs()
				if d := float64(t1 - t0); plain == 0 || d < plain {
					plain = d
				}
				if d := float64(t2 - t1); ours == 0 || d < ours {
					ours = d
				}
			}
			b.ReportMetric(float64(len(w))/plain, "GB/s-plain")
			b.ReportMetric(float64(len(w))/ours, "GB/s-q4x4")
			b.ReportMetric(plain/ours, "speedup")
		})
	}
}
