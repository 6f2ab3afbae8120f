package matvec

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// f16 decodes IEEE half bits exactly (float64 reference side).
func f16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10)&0x1f, float64(h&0x3ff)
	if e == 0 {
		return sign * m * math.Pow(2, -24)
	}
	return sign * (1 + m/1024) * math.Pow(2, float64(e-15))
}

// weights makes rows*k/QK random blocks of t: fp16 scales (normal, a few
// subnormal or zero) and random quants, returning the bytes and the exact
// dequantised values.
func weights(rng *rand.Rand, t Type, rows, k int) ([]byte, []float64) {
	nb := k / QK
	w := make([]byte, rows*nb*t.BlockBytes())
	deq := make([]float64, rows*k)
	for r := 0; r < rows; r++ {
		for b := 0; b < nb; b++ {
			off := (r*nb + b) * t.BlockBytes()
			h := uint16(rng.Intn(7)+8)<<10 | uint16(rng.Intn(1024))
			switch rng.Intn(16) {
			case 0:
				h = uint16(rng.Intn(1024)) // subnormal or zero
			case 1:
				h |= 0x8000
			}
			w[off], w[off+1] = byte(h), byte(h>>8)
			d := f16(h)
			base := r*k + b*QK
			if t == Q8_0 {
				for i := 0; i < QK; i++ {
					q := int8(rng.Intn(255) - 127)
					w[off+2+i] = byte(q)
					deq[base+i] = d * float64(q)
				}
				continue
			}
			for i := 0; i < 16; i++ {
				lo, hi := rng.Intn(16), rng.Intn(16)
				w[off+2+i] = byte(lo | hi<<4)
				deq[base+i] = d * float64(lo-8)
				deq[base+i+16] = d * float64(hi-8)
			}
		}
	}
	return w, deq
}

func activations(rng *rand.Rand, n, k int) []float32 {
	x := make([]float32, n*k)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if rng.Intn(50) == 0 {
			x[i] = 0
		}
	}
	return x
}

// bound is the error allowed for output (r, j) against the float64 product
// of the dequantised weights and the unquantised activations:
//   - activation quantisation: |x - dx*q| <= dx/2 per element (round to
//     nearest), plus a few f32 ulps of |x| from the rounded 1/dx and dx,
//     plus |q| <= 127 times the fp16 rounding of the stored scale (ggml's
//     Q8_0 keeps dx as fp16: relative 2^-11, absolute 2^-25 when subnormal);
//   - f32 arithmetic (contract c, lanes = 32/c): each block's term
//     lane*s carries one rounding of s = dw*dx, then the lane's nb fmas
//     (one rounding each, relative to a partial sum no larger than the sum
//     of the lane's |terms|), then the log2(lanes) levels of the fixed
//     tree: m = nb + 1 + log2(lanes) roundings of at most u = 2^-24 on any
//     term's path, so |error| <= gamma_m * sum |terms|, gamma_m = m*u/(1-m*u)
//     (Higham, Accuracy and Stability, 3.1). C4: m = nb+4; C8, half the
//     lanes, one tree level fewer: m = nb+3. |terms| <= |w|(|x| + dx).
func bound(c Contract, deq []float64, x []float32, r, j, k int) float64 {
	const eps = 1.0 / (1 << 23)
	nb := k / QK
	levels := 0
	for l := QK / int(c); l > 1; l /= 2 {
		levels++
	}
	quant, terms := 0.0, 0.0
	for b := 0; b < nb; b++ {
		amax := 0.0
		for i := 0; i < QK; i++ {
			amax = math.Max(amax, math.Abs(float64(x[j*k+b*QK+i])))
		}
		dx := amax / 127
		bt := 0.0
		for i := 0; i < QK; i++ {
			wv := math.Abs(deq[r*k+b*QK+i])
			xv := math.Abs(float64(x[j*k+b*QK+i]))
			quant += wv * (dx/2*(1+4*eps) + 4*eps*xv + 127*(dx/(1<<11)+1.0/(1<<25)))
			bt += wv * (xv + dx)
		}
		terms += bt
	}
	m := float64(nb + 1 + levels)
	u := eps / 2
	return quant + m*u/(1-m*u)*terms
}

var shapes = []struct{ rows, k int }{{1, 32}, {7, 96}, {33, 320}, {64, 256}}

func TestMulMatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, ty := range []Type{Q8_0, Q4_0} {
		for _, sh := range shapes {
			w, deq := weights(rng, ty, sh.rows, sh.k)
			a, err := NewActivations(sh.k)
			if err != nil {
				t.Fatal(err)
			}
			for n := 1; n <= MaxN; n++ {
				x := activations(rng, n, sh.k)
				if err := a.Set(x); err != nil {
					t.Fatal(err)
				}
				for _, impl := range Available() {
					for threads := 1; threads <= 4; threads++ {
						y := make([]float32, n*sh.rows)
						if err := Mul(impl, ty, w, sh.rows, a, y, threads); err != nil {
							t.Fatal(err)
						}
						for j := 0; j < n; j++ {
							for r := 0; r < sh.rows; r++ {
								ref := 0.0
								for i := 0; i < sh.k; i++ {
									ref += deq[r*sh.k+i] * float64(x[j*sh.k+i])
								}
								if d, tol := math.Abs(float64(y[j*sh.rows+r])-ref), bound(impl.Contract(), deq, x, r, j, sh.k); d > tol {
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

// TestBatchInvariant: row j of an n-row call is bitwise the single-row call
// on x_j, for every type, n, thread count and implementation; and every
// implementation gives its contract's reference's bits (Impl.Reference:
// Scalar for C4, Scalar8 for C8).
func TestBatchInvariant(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, ty := range []Type{Q8_0, Q4_0} {
		for _, sh := range shapes {
			w, _ := weights(rng, ty, sh.rows, sh.k)
			x := activations(rng, MaxN, sh.k)
			singles := map[Impl][][]float32{}
			var a *Activations
			for _, ref := range []Impl{Scalar, Scalar8} {
				a, singles[ref] = singleRows(t, ref, ty, w, sh.rows, sh.k, x)
			}
			for n := 1; n <= MaxN; n++ {
				_ = a.Set(x[:n*sh.k])
				for _, impl := range Available() {
					single := singles[impl.Reference()]
					for threads := 1; threads <= 4; threads++ {
						y := make([]float32, n*sh.rows)
						_ = Mul(impl, ty, w, sh.rows, a, y, threads)
						for j := 0; j < n; j++ {
							for r := 0; r < sh.rows; r++ {
								if got, want := math.Float32bits(y[j*sh.rows+r]), math.Float32bits(single[j][r]); got != want {
									t.Fatalf("%v %v %dx%d n=%d threads=%d row %d act %d: %g (%#x), single-row %v %g (%#x)",
										ty, impl, sh.rows, sh.k, n, threads, r, j, y[j*sh.rows+r], got, impl.Reference(), single[j][r], want)
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestArgs(t *testing.T) {
	if _, err := NewActivations(33); err == nil {
		t.Fatal("k=33 accepted")
	}
	a, _ := NewActivations(32)
	if err := a.Set(make([]float32, 9*32)); err == nil {
		t.Fatal("9 rows accepted")
	}
	_ = a.Set(make([]float32, 32))
	for _, impl := range append([]Impl{-2, NEONI8MM + 1}, allImpls...) {
		if !slices.Contains(Available(), impl) {
			if err := Mul(impl, Q8_0, make([]byte, 34), 1, a, make([]float32, 1), 1); err == nil {
				t.Fatalf("unavailable impl %v accepted", impl)
			}
		}
	}
	if err := Mul(Scalar, Q8_0, make([]byte, 33), 1, a, make([]float32, 1), 1); err == nil {
		t.Fatal("short weights accepted")
	}
}

// BenchmarkMul: 1B-like FFN matrix (2048x5632 as rows x k would be 11.5M
// elements; here 2048 rows x 2048 k), reporting weight GB/s per n.
func BenchmarkMul(b *testing.B) {
	rng := rand.New(rand.NewSource(3))
	const rows, k = 4096, 2048
	for _, ty := range []Type{Q4_0, Q8_0} {
		w, _ := weights(rng, ty, rows, k)
		a, _ := NewActivations(k)
		y := make([]float32, MaxN*rows)
		for _, impl := range Available() {
			for _, n := range []int{1, 2, 4, 8} {
				_ = a.Set(activations(rng, n, k))
				b.Run(fmt.Sprintf("%v/%v/n=%d", ty, impl, n), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for i := 0; i < b.N; i++ {
						_ = Mul(impl, ty, w, rows, a, y, 1)
					}
				})
			}
		}
	}
}

// BenchmarkVn reports v(n) = time of an n-row call ÷ time of a 1-row call
// for the best implementation, n = 1..8, interleaving the sizes and taking
// the minimum of each so that load from other processes cancels as far as
// it can (one process, one thread; LOADED machines give noisy ratios).
func BenchmarkVn(b *testing.B) {
	rng := rand.New(rand.NewSource(4))
	const rows, k = 4096, 2048
	for _, ty := range []Type{Q4_0, Q8_0} {
		w, _ := weights(rng, ty, rows, k)
		a, _ := NewActivations(k)
		y := make([]float32, MaxN*rows)
		x := activations(rng, MaxN, k)
		b.Run(fmt.Sprintf("%v/%v", ty, best), func(b *testing.B) {
			minNs := make([]float64, MaxN+1)
			for i := 0; i < b.N; i++ {
				for n := 1; n <= MaxN; n++ {
					_ = a.Set(x[:n*k])
					t0 := nowNs()
					_ = Mul(best, ty, w, rows, a, y, 1)
					if d := float64(nowNs() - t0); minNs[n] == 0 || d < minNs[n] {
						minNs[n] = d
					}
				}
			}
			b.ReportMetric(float64(len(w))/minNs[1], "GB/s(n=1)")
			for n := 2; n <= MaxN; n++ {
				b.ReportMetric(minNs[n]/minNs[1], fmt.Sprintf("v(%d)", n))
			}
		})
	}
}

// TestMulDoesNotAllocate: a one-thread call allocates nothing (decode's
// zero-allocations-per-token rule), with every available implementation.
func TestMulDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	w, _ := weights(rng, Q4_0, 64, 256)
	a, _ := NewActivations(256)
	x := activations(rng, 4, 256)
	y := make([]float32, 4*64)
	for _, impl := range Available() {
		if n := testing.AllocsPerRun(50, func() {
			_ = a.Set(x)
			_ = Mul(impl, Q4_0, w, 64, a, y, 1)
		}); n != 0 {
			t.Fatalf("%v: %v allocations per call, want 0", impl, n)
		}
	}
}

// singleRows computes each of the MaxN activation rows of x alone with the
// reference ref (Scalar or Scalar8: every batched call of ref's contract
// must equal it bitwise) and returns the activations it used with the
// results.
func singleRows(t *testing.T, ref Impl, ty Type, w []byte, rows, k int, x []float32) (*Activations, [][]float32) {
	t.Helper()
	a, err := NewActivations(k)
	if err != nil {
		t.Fatal(err)
	}
	single := make([][]float32, MaxN)
	for j := range single {
		if err := a.Set(x[j*k : (j+1)*k]); err != nil {
			t.Fatal(err)
		}
		single[j] = make([]float32, rows)
		if err := Mul(ref, ty, w, rows, a, single[j], 1); err != nil {
			t.Fatal(err)
		}
	}
	return a, single
}
