package matvec

import (
	"fmt"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/edgellm/edgellm/kernels"
)

// BenchmarkVsGGML times ggml's own mul_mat (CPU backend, plain buffer: ggml's
// non-repacked vec_dot kernels; ggml's thread pool against our goroutines
// splitting rows, 1 and 2 threads) and ours on the same weights in
// one process, interleaved, minimum of each; it reports ours ÷ ggml (time)
// per n, and v(n) for both. LOADED machines give noisy ratios.
func BenchmarkVsGGML(b *testing.B) {
	rng := rand.New(rand.NewSource(5))
	const rows, k = 4096, 2048
	for _, ty := range []Type{Q4_0, Q8_0} {
		gt := kernels.GGMLType(8) // GGML_TYPE_Q8_0
		if ty == Q4_0 {
			gt = kernels.GGMLType(2) // GGML_TYPE_Q4_0
		}
		w, _ := weights(rng, ty, rows, k)
		x := activations(rng, MaxN, k)
		for _, th := range []int{1, 2} {
			for _, n := range []int{1, 2, 4, 8} {
				b.Run(fmt.Sprintf("%v/n=%d/threads=%d", ty, n, th), func(b *testing.B) {
					ctx, err := kernels.NewGGMLContext(16, 16)
					if err != nil {
						b.Fatal(err)
					}
					defer ctx.Close()
					ga, _ := kernels.NewGallocr()
					defer ga.Close()
					tp, _ := kernels.NewThreadpool(kernels.ThreadpoolParams{NThreads: th})
					defer tp.Close()
					be, _ := kernels.NewCPUBackend(tp, 0)
					defer be.Close()
					wt, _ := ctx.NewTensor(gt, k, rows)
					wt.SetInput()
					xt, _ := ctx.NewTensor(kernels.GGMLType(0), k, int64(n))
					xt.SetInput()
					out := ctx.MulMat(wt, xt)
					out.SetOutput()
					g, err := ctx.NewGraph(16)
					if err != nil {
						b.Fatal(err)
					}
					if err := g.Expand(out); err != nil {
						b.Fatal(err)
					}
					if err := ga.Alloc(g); err != nil {
						b.Fatal(err)
					}
					copy(unsafe.Slice((*byte)(wt.Data()), len(w)), w)
					copy(xt.Float32s(), x[:n*k])
					a, _ := NewActivations(k)
					y := make([]float32, n*rows)
					var ggmlNs, oursNs float64
					for i := 0; i < b.N; i++ {
						t0 := nowNs()
						if err := be.Compute(g); err != nil {
							b.Fatal(err)
						}
						if d := float64(nowNs() - t0); ggmlNs == 0 || d < ggmlNs {
							ggmlNs = d
						}
						t0 = nowNs()
						_ = a.Set(x[:n*k])
						_ = Mul(best, ty, w, rows, a, y, th)
						if d := float64(nowNs() - t0); oursNs == 0 || d < oursNs {
							oursNs = d
						}
					}
					b.ReportMetric(oursNs/ggmlNs, "ours/ggml")
					b.ReportMetric(float64(len(w))/oursNs, "ours_GB/s")
					b.ReportMetric(float64(len(w))/ggmlNs, "ggml_GB/s")
				})
			}
		}
	}
}
