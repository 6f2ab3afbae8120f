package kernels

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// BenchmarkAttnEdgellm alternates ggml's flash attention and AttnEdgellm on
// the same inputs, the 1B shape (hd 64, 32 q heads, 8 kv heads, F16 cache),
// causal mask without holes, in one process, and reports each one's time
// per graph and their ratio (ggml / edgellm: > 1 is edgellm faster).
//
//	go test ./kernels -run '^$' -bench AttnEdgellm -benchtime 200x
func BenchmarkAttnEdgellm(b *testing.B) {
	for _, nkv := range []int{128, 1024} {
		for _, nq := range []int{1, 8} {
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("nkv%d/nq%d/t%d", nkv, nq, threads), func(b *testing.B) {
					p := newAttnProblem(rand.New(rand.NewSource(1)), 64, 32, 8, nkv, nq, 0)
					for j := 0; j < nq; j++ {
						for c := 0; c < nkv; c++ {
							if c <= nkv-nq+j {
								p.mask[j*nkv+c] = 0
							}
						}
					}
					gg := newAttnGraph(b, p, GGMLTypeF16, threads, false)
					own := newAttnGraph(b, p, GGMLTypeF16, threads, true)
					gg.run(b, p)
					own.run(b, p)
					var tg, to time.Duration
					b.ResetTimer()
					for range b.N {
						t0 := time.Now()
						if err := gg.be.Compute(gg.g); err != nil {
							b.Fatal(err)
						}
						t1 := time.Now()
						if err := own.be.Compute(own.g); err != nil {
							b.Fatal(err)
						}
						to += time.Since(t1)
						tg += t1.Sub(t0)
					}
					b.ReportMetric(float64(tg.Microseconds())/float64(b.N), "ggml-us")
					b.ReportMetric(float64(to.Microseconds())/float64(b.N), "edgellm-us")
					b.ReportMetric(float64(tg)/float64(to), "ggml/edgellm")
				})
			}
		}
	}
}
