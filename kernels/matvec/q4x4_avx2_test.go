package matvec

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// withQ4x4AVX2 runs f with the AVX2 q4x4 kernel forced, once with its
// maddubs lanes and, where the CPU has AVX-VNNI, once with vpdpbusd ymm
// (skipping where AVX2 is absent), and checks that the force took.
func withQ4x4AVX2(t testing.TB, f func()) {
	t.Helper()
	if !slices.Contains(Available(), AVX2) {
		t.Skip("q4x4 AVX2 kernel needs AVX2+FMA+F16C")
	}
	forces := []func(bool){ForceQ4x4AVX2}
	if Q4x4AVXVNNIAvailable() {
		forces = append(forces, ForceQ4x4AVXVNNI)
	}
	for _, force := range forces {
		force(true)
		if Q4x4Impl() != AVX2 || !Q4x4Available() {
			force(false)
			t.Fatalf("forced: Q4x4Impl %v, Q4x4Available %v", Q4x4Impl(), Q4x4Available())
		}
		func() {
			defer force(false)
			f()
		}()
	}
}

// TestQ4x4AVX2Bitwise: TestQ4x4Bitwise with the AVX2 q4x4 kernel forced
// (so an AVX-512 machine runs it), maddubs and AVX-VNNI lanes.
func TestQ4x4AVX2Bitwise(t *testing.T) {
	withQ4x4AVX2(t, func() { TestQ4x4Bitwise(t) })
}

// TestQ4x4AVX2Rows: above 8 activation rows (prefill; n = 9..128, row
// counts not a multiple of 4, 1..3 threads) the AVX2 kernel's tiles give
// bitwise the single-row scalar reference (TestQ4x4GemmBitwise's checks
// with the AVX2 kernel forced).
func TestQ4x4AVX2Rows(t *testing.T) {
	withQ4x4AVX2(t, func() { TestQ4x4GemmBitwise(t) })
}

// TestQ4x4AVX2Extremes: nibbles 0 and 15 against activation bytes -128 and
// 127 (the largest maddubs pairs, 15*128*2): still the scalar bits.
func TestQ4x4AVX2Extremes(t *testing.T) {
	rng := rand.New(rand.NewSource(32))
	const rows, k = 9, 256
	w, _ := weights(rng, Q4_0, rows, k)
	for i := range w {
		if i%Q4_0.BlockBytes() >= 2 {
			w[i] = []byte{0x00, 0xff, 0x0f, 0xf0}[rng.Intn(4)]
		}
	}
	a, _ := NewActivations(k)
	_ = a.Set(activations(rng, MaxN, k))
	for i := range a.buf {
		if i%ActBlockBytes >= 2 {
			a.buf[i] = []byte{0x80, 0x7f}[rng.Intn(2)]
		}
	}
	want := make([]float32, MaxN*rows)
	if err := Mul(Scalar, Q4_0, w, rows, a, want, 1); err != nil {
		t.Fatal(err)
	}
	p, _ := PackQ4x4(w, rows, k)
	withQ4x4AVX2(t, func() {
		got := make([]float32, MaxN*rows)
		if err := MulQ4x4(p, a, got, 1); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("act %d row %d: avx2 q4x4 %g, scalar %g", i/rows, i%rows, got[i], want[i])
			}
		}
	})
}

// TestQ4x4AVX2MatchesAVX512: on a CPU with both, the two q4x4 kernels
// return the same bits (the dispatch really switches: the test also sees
// Q4x4Impl change).
func TestQ4x4AVX2MatchesAVX512(t *testing.T) {
	if Q4x4Impl() != AVX512VNNI {
		t.Skip("needs the AVX-512 VNNI q4x4 kernel to compare against")
	}
	rng := rand.New(rand.NewSource(33))
	const rows, k = 70, 1024
	w, _ := weights(rng, Q4_0, rows, k)
	p, _ := PackQ4x4(w, rows, k)
	a, _ := NewActivations(k)
	x := activations(rng, MaxN, k)
	for n := 1; n <= MaxN; n++ {
		_ = a.Set(x[:n*k])
		want := make([]float32, n*rows)
		if err := MulQ4x4(p, a, want, 2); err != nil {
			t.Fatal(err)
		}
		withQ4x4AVX2(t, func() {
			got := make([]float32, n*rows)
			if err := MulQ4x4(p, a, got, 3); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d act %d row %d: avx2 %g, avx512 %g", n, i/rows, i%rows, got[i], want[i])
				}
			}
		})
	}
	if Q4x4Impl() != AVX512VNNI {
		t.Fatalf("after the forced run Q4x4Impl is %v", Q4x4Impl())
	}
}

// TestQ4x4AVX2DoesNotAllocate: a one-thread call allocates nothing.
func TestQ4x4AVX2DoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewSource(34))
	w, _ := weights(rng, Q4_0, 64, 256)
	p, _ := PackQ4x4(w, 64, 256)
	a, _ := NewActivations(256)
	_ = a.Set(activations(rng, 4, 256))
	y := make([]float32, 4*64)
	withQ4x4AVX2(t, func() {
		if n := testing.AllocsPerRun(50, func() { _ = MulQ4x4(p, a, y, 1) }); n != 0 {
			t.Fatalf("%v allocations per call, want 0", n)
		}
	})
}

// BenchmarkQ4x4AVX2VsPlain: the AVX2 q4x4 kernel (maddubs lanes, and
// AVX-VNNI lanes where present) ÷ the plain-block AVX2 kernel on the
// matrix of BenchmarkQ4x4VsPlain (8192 x 2048 Q4_0, 9.4 MB), all timed in
// one process, interleaved, minimum of each (LOADED machines: the ratios
// are the figures, not the times).
func BenchmarkQ4x4AVX2VsPlain(b *testing.B) {
	if !slices.Contains(Available(), AVX2) {
		b.Skip("q4x4 AVX2 kernel needs AVX2+FMA+F16C")
	}
	defer ForceQ4x4AVX2(false)
	rng := rand.New(rand.NewSource(9))
	const rows, k = 8192, 2048
	w, _ := weights(rng, Q4_0, rows, k)
	p, _ := PackQ4x4(w, rows, k)
	a, _ := NewActivations(k)
	y := make([]float32, MaxN*rows)
	x := activations(rng, MaxN, k)
	vnni := Q4x4AVXVNNIAvailable()
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			_ = a.Set(x[:n*k])
			var best [3]float64 // plain blocks, q4x4 maddubs, q4x4 AVX-VNNI
			for i := 0; i < b.N; i++ {
				for v := range best {
					t0 := nowNs()
					switch v {
					case 0:
						_ = Mul(AVX2, Q4_0, w, rows, a, y, 1)
					case 1:
						ForceQ4x4AVX2(true)
						t0 = nowNs()
						_ = MulQ4x4(p, a, y, 1)
					case 2:
						if !vnni {
							continue
						}
						ForceQ4x4AVXVNNI(true)
						t0 = nowNs()
						_ = MulQ4x4(p, a, y, 1)
					}
					if d := float64(nowNs() - t0); best[v] == 0 || d < best[v] {
						best[v] = d
					}
				}
			}
			b.ReportMetric(float64(len(w))/best[0], "GB/s-plain")
			b.ReportMetric(float64(len(w))/best[1], "GB/s-q4x4")
			b.ReportMetric(best[0]/best[1], "speedup")
			if vnni {
				b.ReportMetric(float64(len(w))/best[2], "GB/s-q4x4vnni")
				b.ReportMetric(best[0]/best[2], "speedup-vnni")
			}
		})
	}
}
