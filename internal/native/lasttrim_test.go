package native

import (
	"math"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
)

// TestLastLayerTrim: computing the last layer's q, attention and output
// projection only for the row that wants logits (every session's graph)
// changes no bit of the logits against computing them for every row first
// (graph.untrimmed), with flash and classic attention and repacked
// weights, on every family; and the graph's activations shrink by at least
// those rows of q and of the attention output.
func TestLastLayerTrim(t *testing.T) {
	const nTok = 64
	for _, name := range tinyFamilies {
		for _, repack := range []bool{false, true} {
			for _, att := range []engine.Attention{engine.AttentionFlash, engine.AttentionClassic} {
				e, err := Load(familyModel(t, name, gguf.Q4_0), Options{Repack: repack})
				if err != nil {
					t.Fatal(err)
				}
				var logits [2][]float32
				var keepAll [2]int64
				for i, trim := range []bool{false, true} {
					es, err := e.NewSession(engine.SessionConfig{NCtx: 256, Threads: 1, Attention: att})
					if err != nil {
						t.Fatal(err)
					}
					s := SessionOf(es)
					s.gr.untrimmed = !trim // before the first build
					toks := make([]int32, nTok)
					for j := range toks {
						toks[j] = int32(1 + (7*j)%(s.cfg.NVocab-1))
					}
					if err := s.Decode(toks, engine.LogitsLast); err != nil {
						t.Fatal(err)
					}
					logits[i] = make([]float32, s.cfg.NVocab)
					if err := s.Logits(nTok-1, logits[i]); err != nil {
						t.Fatal(err)
					}
					// the same graph, built again unallocated: its activations
					g, err := s.newGraph()
					if err != nil {
						t.Fatal(err)
					}
					g.ringOf, g.untrimmed = s.ringOf, !trim
					if err := g.build(s.gr.key, s.cfg, s.eng.sets[s.headSet], s.layers, s.kv, s.flash); err != nil {
						t.Fatal(err)
					}
					keepAll[i] = g.g.Memory().KeepAll
					g.Close()
					es.Close()
				}
				e.Close()
				for j := range logits[0] {
					if math.Float32bits(logits[0][j]) != math.Float32bits(logits[1][j]) {
						t.Fatalf("%s repack=%v %s: logit %d: %v trimmed, %v not", name, repack, att, j, logits[1][j], logits[0][j])
					}
				}
				cfg := e.w.Config
				rows := int64((nTok - 1) * cfg.HeadDim * cfg.NHead * 4) // F32 q or attention rows
				if saved := keepAll[0] - keepAll[1]; saved < 2*rows {
					t.Errorf("%s repack=%v %s: trimming saved %d activation bytes, want ≥ %d", name, repack, att, saved, 2*rows)
				}
			}
		}
	}
}
