package matvec

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
)

// pfBigBytes is the weight size of BenchmarkPrefetch's matrices: above the
// 300 MiB L3 of the machine this was measured on, so every call streams
// its weights from memory as decode does.
const pfBigBytes = 400 << 20

// bigWeights tiles a random rows0 x k matrix of t until it is about
// pfBigBytes; it returns the bytes and the row count.
func bigWeights(rng *rand.Rand, t Type, k int) ([]byte, int) {
	const rows0 = 1024
	var w0 []byte
	if t == F32 || t == F16 {
		w0, _ = floatWeights(rng, t, rows0, k)
	} else {
		w0, _ = weights(rng, t, rows0, k)
	}
	reps := pfBigBytes / len(w0)
	w := make([]byte, reps*len(w0))
	for i := 0; i < reps; i++ {
		copy(w[i*len(w0):], w0)
	}
	return w, reps * rows0
}

// BenchmarkPrefetch: each kernel with its software prefetch off and on,
// alternated call by call in one process (one thread) on a matrix larger
// than the L3; reports the median of the per-pair ratios off ÷ on
// (> 1: prefetch pays) and the weight GB/s with prefetch. For a loaded
// machine: ratios only.
func BenchmarkPrefetch(b *testing.B) {
	defer setPrefetch(true)
	rng := rand.New(rand.NewSource(31))
	const k = 2048
	pair := func(b *testing.B, bytes int, call func()) {
		var ratios []float64
		minOn := 0.0
		for i := 0; i < b.N; i++ {
			var d [2]float64
			for o := 0; o < 2; o++ {
				on := (i+o)%2 == 1
				setPrefetch(on)
				t0 := nowNs()
				call()
				t := float64(nowNs() - t0)
				if on {
					d[1] = t
					if minOn == 0 || t < minOn {
						minOn = t
					}
				} else {
					d[0] = t
				}
			}
			ratios = append(ratios, d[0]/d[1])
		}
		sort.Float64s(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "off/on")
		b.ReportMetric(float64(bytes)/minOn, "GB/s-on")
	}
	for _, ty := range []Type{Q4_0, Q8_0} {
		w, rows := bigWeights(rng, ty, k)
		a, _ := NewActivations(k)
		y := make([]float32, MaxN*rows)
		x := activations(rng, MaxN, k)
		for _, impl := range Available() {
			for _, n := range []int{1, 8} {
				if impl == Scalar && n > 1 {
					continue
				}
				_ = a.Set(x[:n*k])
				b.Run(fmt.Sprintf("%v/%v/n=%d", ty, impl, n), func(b *testing.B) {
					pair(b, len(w), func() { _ = Mul(impl, ty, w, rows, a, y, 1) })
				})
			}
		}
		if ty != Q4_0 || !Q4x4Available() {
			continue
		}
		p, _ := PackQ4x4(w, rows, k)
		if slices.Contains(Available(), AVX2) {
			for _, n := range []int{1, 2, 4, 8} {
				_ = a.Set(x[:n*k])
				b.Run(fmt.Sprintf("q4x4-avx2/n=%d", n), func(b *testing.B) {
					ForceQ4x4AVX2(true)
					defer ForceQ4x4AVX2(false)
					pair(b, len(w), func() { _ = MulQ4x4(p, a, y, 1) })
				})
			}
		}
		if q4x4AVX512Available() {
			const n = 64
			as := k / QK * ActBlockBytes
			act := make([]byte, n*as)
			xs := activations(rng, n, k)
			for j := 0; j < n; j++ {
				_ = a.Set(xs[j*k : (j+1)*k])
				copy(act[j*as:], a.Bytes())
			}
			yg := make([]float32, n*rows)
			b.Run(fmt.Sprintf("q4x4-gemm/n=%d", n), func(b *testing.B) {
				pair(b, len(w), func() { _ = MulQ4x4Rows(p, act, n, yg, 1) })
			})
		}
	}
	for _, ty := range []Type{F32, F16} {
		w, rows := bigWeights(rng, ty, k)
		x := make([]float32, MaxN*k)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := make([]float32, MaxN*rows)
		for _, impl := range Available() {
			if impl == Scalar {
				continue
			}
			for _, n := range []int{1, 4} {
				b.Run(fmt.Sprintf("%v/%v/n=%d", ty, impl, n), func(b *testing.B) {
					pair(b, len(w), func() { _ = MulFloat(impl, ty, w, rows, k, x[:n*k], y, 1) })
				})
			}
		}
	}
}
