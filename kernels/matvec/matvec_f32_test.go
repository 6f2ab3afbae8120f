package matvec

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// floatWeights makes rows*k random weights of t (F32: normal values, some
// zero or negative zero; F16: random half bits of normal, subnormal and
// zero magnitude), returning the bytes and the exact values.
func floatWeights(rng *rand.Rand, t Type, rows, k int) ([]byte, []float64) {
	w := make([]byte, rows*k*t.elemBytes())
	vals := make([]float64, rows*k)
	for i := range vals {
		if t == F16 {
			h := uint16(rng.Intn(17)+3)<<10 | uint16(rng.Intn(1024))
			switch rng.Intn(16) {
			case 0:
				h = uint16(rng.Intn(1024)) // subnormal or zero
			case 1, 2, 3, 4, 5, 6, 7:
				h |= 0x8000
			}
			binary.LittleEndian.PutUint16(w[2*i:], h)
			vals[i] = f16(h)
			continue
		}
		v := float32(rng.NormFloat64())
		switch rng.Intn(40) {
		case 0:
			v = 0
		case 1:
			v = float32(math.Copysign(0, -1))
		}
		binary.LittleEndian.PutUint32(w[4*i:], math.Float32bits(v))
		vals[i] = float64(v)
	}
	return w, vals
}

// floatShapes include k not a multiple of 16 (the masked last chunk), and
// stories260K's 64, 172 and 192.
var floatShapes = []struct{ rows, k int }{{1, 5}, {3, 16}, {7, 37}, {9, 64}, {33, 172}, {64, 192}, {5, 1000}}

// TestMulFloatMatchesFloat64: every float kernel, n and thread count is
// within the f32 error bound of the float64 product. Each lane is a chain
// of m = ceil(k/16) fmas (one rounding each; the first, from +0, exact)
// and the fold adds four levels, so |y - exact| <= gamma(m+4) * sum|w_i
// x_i| with gamma(p) = p*u/(1-p*u), u = 2^-24 (Higham, Accuracy and
// Stability of Numerical Algorithms, 2nd ed., sec. 3.1); the float64
// reference's own error (k*2^-53 of the same sum) is added.
func TestMulFloatMatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	const u = 1.0 / (1 << 24)
	for _, ty := range []Type{F32, F16} {
		for _, sh := range floatShapes {
			w, vals := floatWeights(rng, ty, sh.rows, sh.k)
			for n := 1; n <= MaxN+1; n++ {
				x := activations(rng, n, sh.k)
				p := float64((sh.k+FloatLanes-1)/FloatLanes + 4)
				gamma := p * u / (1 - p*u)
				for _, impl := range Available() {
					for threads := 1; threads <= 3; threads++ {
						y := make([]float32, n*sh.rows)
						if err := MulFloat(impl, ty, w, sh.rows, sh.k, x, y, threads); err != nil {
							t.Fatal(err)
						}
						for j := 0; j < n; j++ {
							for r := 0; r < sh.rows; r++ {
								ref, abs := 0.0, 0.0
								for i := 0; i < sh.k; i++ {
									v := vals[r*sh.k+i] * float64(x[j*sh.k+i])
									ref += v
									abs += math.Abs(v)
								}
								tol := gamma*abs + float64(sh.k)*abs/(1<<53)
								if d := math.Abs(float64(y[j*sh.rows+r]) - ref); d > tol {
									t.Fatalf("%v %v %dx%d n=%d threads=%d row %d act %d: got %g want %g (|diff| %g > %g)",
										ty, impl, sh.rows, sh.k, n, threads, r, j, y[j*sh.rows+r], ref, d, tol)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestMulFloatBatchInvariant: row j of an n-row call (n = 1..9) is bitwise
// the single-row scalar call on x_j, for F32 and F16 weights, every
// implementation and thread count.
func TestMulFloatBatchInvariant(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	for _, ty := range []Type{F32, F16} {
		for _, sh := range floatShapes {
			w, _ := floatWeights(rng, ty, sh.rows, sh.k)
			x := activations(rng, MaxN+1, sh.k)
			single := make([][]float32, MaxN+1)
			for j := range single {
				single[j] = make([]float32, sh.rows)
				if err := MulFloat(Scalar, ty, w, sh.rows, sh.k, x[j*sh.k:(j+1)*sh.k], single[j], 1); err != nil {
					t.Fatal(err)
				}
			}
			for n := 1; n <= MaxN+1; n++ {
				for _, impl := range Available() {
					for threads := 1; threads <= 4; threads++ {
						y := make([]float32, n*sh.rows)
						if err := MulFloat(impl, ty, w, sh.rows, sh.k, x[:n*sh.k], y, threads); err != nil {
							t.Fatal(err)
						}
						for j := 0; j < n; j++ {
							for r := 0; r < sh.rows; r++ {
								if got, want := math.Float32bits(y[j*sh.rows+r]), math.Float32bits(single[j][r]); got != want {
									t.Fatalf("%v %v %dx%d n=%d threads=%d row %d act %d: %g (%#x), single-row scalar %g (%#x)",
										ty, impl, sh.rows, sh.k, n, threads, r, j, y[j*sh.rows+r], got, single[j][r], want)
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestMulFloatArgs(t *testing.T) {
	x := make([]float32, 32)
	if err := MulFloat(Scalar, Q8_0, make([]byte, 128), 1, 32, x, make([]float32, 1), 1); err == nil {
		t.Fatal("q8_0 accepted by the float kernels")
	}
	if err := MulFloat(Scalar, F32, make([]byte, 127), 1, 32, x, make([]float32, 1), 1); err == nil {
		t.Fatal("short weights accepted")
	}
	if err := MulFloat(Scalar, F16, make([]byte, 64), 1, 32, x[:31], make([]float32, 1), 1); err == nil {
		t.Fatal("x not whole rows accepted")
	}
	for _, impl := range append([]Impl{-2, NEONI8MM + 1}, allImpls...) {
		if !slices.Contains(Available(), impl) {
			if err := MulFloat(impl, F32, make([]byte, 128), 1, 32, x, make([]float32, 1), 1); err == nil {
				t.Fatalf("unavailable impl %v accepted", impl)
			}
		}
	}
}

// TestMulFloatDoesNotAllocate: a one-thread call allocates nothing.
func TestMulFloatDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewSource(13))
	w, _ := floatWeights(rng, F32, 64, 192)
	x := activations(rng, 4, 192)
	y := make([]float32, 4*64)
	if n := testing.AllocsPerRun(50, func() { _ = MulFloat(best, F32, w, 64, 192, x, y, 1) }); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
}

// BenchmarkMulFloat: weight GB/s per type, impl and n (one thread).
func BenchmarkMulFloat(b *testing.B) {
	rng := rand.New(rand.NewSource(14))
	const rows, k = 1024, 2048
	for _, ty := range []Type{F32, F16} {
		w, _ := floatWeights(rng, ty, rows, k)
		y := make([]float32, MaxN*rows)
		for _, impl := range Available() {
			for _, n := range []int{1, 2, 4, 8} {
				x := activations(rng, n, k)
				b.Run(fmt.Sprintf("%v/%v/n=%d", ty, impl, n), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for i := 0; i < b.N; i++ {
						_ = MulFloat(impl, ty, w, rows, k, x, y, 1)
					}
				})
			}
		}
	}
}
