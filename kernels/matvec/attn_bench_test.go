package matvec

import (
	"fmt"
	"math/rand"
	"testing"
)

// BenchmarkAttn: the kernel alone on one goroutine, the 1B shape (hd 64,
// 32 q heads, 8 kv heads), causal mask without holes.
//
//	go test ./kernels/matvec -run '^$' -bench Attn -benchtime 300x
func BenchmarkAttn(b *testing.B) {
	for _, nkv := range []int{128, 1024} {
		for _, nq := range []int{1, 8} {
			b.Run(fmt.Sprintf("nkv%d/nq%d", nkv, nq), func(b *testing.B) {
				s := AttnShape{HD: 64, NQ: nq, NHead: 32, NHeadKV: 8, NKV: nkv, Scale: 0.125}
				c := newAttnCase(rand.New(rand.NewSource(1)), s, false, 0, -1)
				out := make([]float32, nq*32*64)
				for range b.N {
					if err := Attn(Best(), s, c.q, c.k, c.v, c.mask, out, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nq*32*nkv), "ns/pair")
			})
		}
	}
}
