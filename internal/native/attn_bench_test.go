package native

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/kernels"
	"github.com/edgellm/edgellm/kernels/matvec"
)

// BenchmarkOwnAttentionDecode: decode steps of the SYNTHETIC 1B shape at a
// quarter width (Q4_0, hd 64, 8 q heads, 2 kv heads, 16 layers) with
// edgellm's matmuls, ggml's flash attention against edgellm's attention
// (SessionConfig.Attention edgellm), alternated 8 steps at a time in one process
// after a 96-token prefill; reports ms per token of each and their ratio.
//
//	go test ./internal/native -run '^$' -bench OwnAttentionDecode -benchtime 64x
func BenchmarkOwnAttentionDecode(b *testing.B) {
	if !matvec.AttnUsable() {
		b.Skip("no edgellm attention kernel on this CPU")
	}
	path := synthModel(b, l1bQuarter, gguf.Q4_0)
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("t%d", threads), func(b *testing.B) {
			var ss [2]engine.Session
			var toks [2][]int32
			for i, own := range []bool{false, true} {
				e, err := Load(path, Options{Threads: threads, NoVocab: true, Kernels: KernelsEdgellm})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				sc := engine.SessionConfig{NCtx: 1024}
				if own {
					sc.Attention = engine.AttentionEdgellm
				}
				s, err := e.NewSession(sc)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				prompt := make([]int32, 96)
				for j := range prompt {
					prompt[j] = int32(1 + (7*j)%500)
				}
				if err := s.Decode(prompt, engine.LogitsLast); err != nil {
					b.Fatal(err)
				}
				ss[i], toks[i] = s, []int32{1}
			}
			logits := make([]float32, 32000)
			var el [2]time.Duration
			b.ResetTimer()
			for n := 0; n < b.N; n += 8 {
				for i, s := range ss {
					t0 := time.Now()
					for range 8 {
						if err := s.Decode(toks[i], engine.LogitsLast); err != nil {
							b.Fatal(err)
						}
						s.Logits(0, logits[:SessionOf(s).cfg.NVocab])
						toks[i][0] = kernels.Argmax(logits[:SessionOf(s).cfg.NVocab])
					}
					el[i] += time.Since(t0)
				}
			}
			steps := float64((b.N + 7) / 8 * 8)
			b.ReportMetric(float64(el[0].Microseconds())/1000/steps, "ggml-fa-ms/tok")
			b.ReportMetric(float64(el[1].Microseconds())/1000/steps, "edgellm-attn-ms/tok")
			b.ReportMetric(float64(el[0])/float64(el[1]), "ratio")
		})
	}
}
