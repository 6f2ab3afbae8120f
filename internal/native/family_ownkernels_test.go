package native

import (
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// layerMatmuls is how many weight matmuls one layer of cfg's family makes:
// q, k, v (one fused product for Phi-3), the output projection, and gate,
// up (one fused product for Phi-3) and down.
func layerMatmuls(cfg *Config) int {
	n := 3 + 1 + 3
	if cfg.Fam.FusedQKV {
		n -= 2
	}
	if cfg.Fam.FusedGateUp {
		n--
	}
	return n
}

// TestFamilyOwnKernels: on every SYNTHETIC tiny family model (Q4_0 and
// Q8_0), Options.Kernels "edgellm" runs every layer's weight matmuls as
// edgellm's custom op (through the q4x4 layout for Q4_0 where the CPU runs
// it), and greedy decoding gives ggml's kernels' tokens with every step's
// logits within sharedtest's tolerance of ggml's; and speculation on the
// edgellm kernels (skip:1, ngram, self:q4_0 on the Q8_0 target) gives the
// plain greedy tokens exactly.
func TestFamilyOwnKernels(t *testing.T) {
	const steps = 32
	greedy := sample.Params{TopP: 1, RepeatPenalty: 1}
	for _, name := range tinyFamilies {
		for _, typ := range []gguf.Type{gguf.Q4_0, gguf.Q8_0} {
			t.Run(name+"/"+typ.String(), func(t *testing.T) {
				path := familyModel(t, name, typ)
				var toks [2][]int32
				var logits [2][][]float32
				var e *Engine
				for i, kern := range []string{KernelsGGML, KernelsEdgellm} {
					var err error
					opts := Options{Threads: 2, NoVocab: true, Kernels: kern}
					if typ == gguf.Q8_0 {
						opts.ExtraSets = []string{familyModel(t, name, gguf.Q4_0)}
					}
					if e, err = Load(path, opts); err != nil {
						t.Fatal(err)
					}
					s, err := e.NewSession(engine.SessionConfig{NCtx: 256})
					if err != nil {
						t.Fatal(err)
					}
					nv := e.Config().NVocab
					tok := []int32{1, 20, 30, 40} // a prefill within EdgellmMaxN, then decode steps
					for range steps {
						if err := s.Decode(tok, engine.LogitsLast); err != nil {
							t.Fatal(err)
						}
						l := make([]float32, nv)
						if err := s.Logits(len(tok)-1, l); err != nil {
							t.Fatal(err)
						}
						logits[i] = append(logits[i], l)
						tok = []int32{kernels.Argmax(l)}
						toks[i] = append(toks[i], tok[0])
					}
					custom := customOps(s)
					s.Close()
					cfg := e.Config()
					want := layerMatmuls(&cfg) * cfg.NLayer
					if kern == KernelsGGML && custom != 0 || kern == KernelsEdgellm && custom < want {
						t.Fatalf("%s kernels: %d custom ops per decode graph, want %d or more", kern, custom, want)
					}
					if kern == KernelsEdgellm {
						own := e.report.OwnLayout.Tensors
						if typ == gguf.Q4_0 && kernels.EdgellmQ4x4Available() && own < want {
							t.Fatalf("%d matrices in the q4x4 layout, want %d or more", own, want)
						}
						t.Logf("%d custom ops per decode graph (%d layer matmuls), %d q4x4 matrices", custom, want, own)
						break // e stays open for speculation
					}
					e.Close()
				}
				defer e.Close()
				for j := range toks[0] {
					if err := sharedtest.CompareLogits(logits[1][j], logits[0][j]); err != nil {
						t.Fatalf("step %d, edgellm against ggml: %v", j, err)
					}
					if toks[0][j] != toks[1][j] {
						t.Fatalf("step %d: edgellm token %d, ggml %d (tokens %v vs %v)", j, toks[1][j], toks[0][j], toks[1], toks[0])
					}
				}

				// speculation on the edgellm kernels: exact greedy identity
				prompt := []int32{1, 403, 407, 261, 378, 293, 280, 284}
				const n = 48
				su := specSetup{name: "full"}
				s := specSession(t, e, su)
				want := plainRun(t, s, greedy, prompt, n)
				s.Close()
				drafts := []DraftSpec{{Kind: DraftSkip, N: 1}, {Kind: DraftNgram}}
				if typ == gguf.Q8_0 {
					drafts = append(drafts, DraftSpec{Kind: DraftSelf, Type: "q4_0"})
				}
				for _, d := range drafts {
					s := specSession(t, e, su)
					got, st := specRun(t, s, d, greedy, 4, prompt, n)
					s.Close()
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s: token %d: speculative %d, plain %d", d, i, got[i], want[i])
					}
					t.Logf("%s: acceptance %.3f over %d rounds", d, st.Acceptance(), st.Rounds)
				}
			})
		}
	}
}
