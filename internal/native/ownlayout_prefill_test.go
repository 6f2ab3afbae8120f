package native

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// TestOwnLayoutQ4x4Prefill: with Kernels "edgellm" and q4x4 copies, a
// prefill batch larger than kernels.EdgellmMaxN runs on the copies too
// (zeroed, its logits change) and every row of it is bitwise the single
// step's logits over the same tokens, at 1 and 2 threads.
func TestOwnLayoutQ4x4Prefill(t *testing.T) {
	if !kernels.EdgellmQ4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	toks := make([]int32, kernels.EdgellmMaxN+11)
	for i := range toks {
		toks[i] = int32(1 + (i*37)%250)
	}
	for _, path := range []string{
		filepath.Join(sharedtest.Dir(), "models", "derived", "stories260K-ff192-Q4_0.gguf"),
		synthModel(t, l1bQuarter, gguf.Q4_0),
	} {
		for _, threads := range []int{1, 2} {
			t.Run(filepath.Base(path), func(t *testing.T) {
				e, err := Load(path, Options{Threads: threads, NoVocab: true, Kernels: KernelsEdgellm})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				if e.own == nil {
					t.Fatal("no q4x4 copies")
				}
				nv := e.Config().NVocab
				prefill := func() [][]float32 {
					s, err := e.NewSession(engine.SessionConfig{NCtx: 64})
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					if err := s.Decode(toks, engine.LogitsAll); err != nil {
						t.Fatal(err)
					}
					out := make([][]float32, len(toks))
					for j := range out {
						out[j] = make([]float32, nv)
						s.Logits(j, out[j])
					}
					return out
				}
				batch := prefill()
				s, err := e.NewSession(engine.SessionConfig{NCtx: 64})
				if err != nil {
					t.Fatal(err)
				}
				single := make([]float32, nv)
				for j, tok := range toks {
					if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
						t.Fatal(err)
					}
					s.Logits(0, single)
					for v := range single {
						if a, b := batch[j][v], single[v]; math.Float32bits(a) != math.Float32bits(b) {
							t.Fatalf("threads %d row %d logit %d: prefill %g, single step %g", threads, j, v, a, b)
						}
					}
				}
				s.Close()
				clearOwnCopies(e)
				z := prefill()
				same := true
				for v := range z[len(z)-1] {
					same = same && math.Float32bits(z[len(z)-1][v]) == math.Float32bits(batch[len(z)-1][v])
				}
				if same {
					t.Fatal("zeroed q4x4 copies left the prefill logits unchanged: prefill does not read them")
				}
			})
		}
	}
}
