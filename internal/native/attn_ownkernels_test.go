package native

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
	"github.com/edgellm/edgellm/kernels/matvec"
)

// attnOps is how many edgellm attention ops and FLASH_ATTN_EXT nodes the
// session's last graph has.
func attnOps(s engine.Session) (own, flash int) {
	g := SessionOf(s).lastGr.g
	return g.CountAttnEdgellm(), g.CountOps("FLASH_ATTN_EXT")
}

// TestOwnKernelsAttention: with SessionConfig.Attention edgellm every
// layer's attention of a decode step, a verify batch (n <= EdgellmMaxN)
// or a prefill is edgellm's attention op (kernels.AttnEdgellm) and no
// FLASH_ATTN_EXT is left, with ggml's or edgellm's matmuls, while the
// default attention keeps ggml's FLASH_ATTN_EXT; and, with Options.Kernels
// "edgellm", a
// verify batch of n = 2..9 tokens (and an 11-token prefill) gives each
// row's logits bitwise equal to the single steps' with that op in the
// graph, at 1 and 2 threads: the SYNTHETIC 1B shape at a quarter width
// (hd 64, GQA 4; Q4_0, the prefill too where the q4x4 layout runs) and
// stories260K (hd 8, GQA 2).
func TestOwnKernelsAttention(t *testing.T) {
	if !matvec.AttnUsable() {
		t.Skip("no edgellm attention kernel on this CPU: ggml's flash attention stays")
	}
	toks := []int32{1, 403, 407, 261, 378, 414, 270, 262, 300, 310, 320}
	models := []string{
		synthModel(t, l1bQuarter, gguf.Q4_0),
		filepath.Join(sharedtest.Dir(), "models", "derived", "stories260K-ff192-Q8_0.gguf"),
	}
	for _, path := range models {
		for _, threads := range []int{1, 2} {
			name := fmt.Sprintf("%s/t%d", filepath.Base(path), threads)
			// either kernels: the default attention is ggml's flash
			// attention, unchanged; edgellm's replaces it in every layer
			for _, kern := range []string{KernelsGGML, KernelsEdgellm} {
				g, err := Load(path, Options{Threads: threads, NoVocab: true, Kernels: kern})
				if err != nil {
					t.Fatal(err)
				}
				nl := g.Config().NLayer
				for _, att := range []engine.Attention{engine.AttentionAuto, engine.AttentionEdgellm} {
					gs, _ := g.NewSession(engine.SessionConfig{NCtx: 64, Attention: att})
					if err := gs.Decode(toks[:1], engine.LogitsLast); err != nil {
						t.Fatal(err)
					}
					wantOwn, wantFlash := 0, nl
					if att == engine.AttentionEdgellm {
						wantOwn, wantFlash = nl, 0
					}
					if own, flash := attnOps(gs); own != wantOwn || flash != wantFlash {
						t.Fatalf("%s, %s kernels, attention %s: %d edgellm attention ops, %d FLASH_ATTN_EXT; want %d and %d", name, kern, att, own, flash, wantOwn, wantFlash)
					}
					gs.Close()
				}
				g.Close()
			}

			e, err := Load(path, Options{Threads: threads, NoVocab: true, Kernels: KernelsEdgellm})
			if err != nil {
				t.Fatal(err)
			}
			nv, nl := e.Config().NVocab, e.Config().NLayer
			check := func(s engine.Session, what string) {
				if own, flash := attnOps(s); own != nl || flash != 0 {
					t.Fatalf("%s, %s: %d edgellm attention ops, %d FLASH_ATTN_EXT; want %d and 0", name, what, own, flash, nl)
				}
			}
			single := make([][]float32, len(toks))
			s, _ := e.NewSession(engine.SessionConfig{NCtx: 64, Attention: engine.AttentionEdgellm})
			for i, tok := range toks {
				if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
					t.Fatal(err)
				}
				check(s, "single step")
				single[i] = make([]float32, nv)
				s.Logits(0, single[i])
			}
			s.Close()
			row := make([]float32, nv)
			for n := 2; n <= kernels.EdgellmMaxN; n++ {
				b, _ := e.NewSession(engine.SessionConfig{NCtx: 64, Attention: engine.AttentionEdgellm})
				for _, tok := range toks[:2] {
					if err := b.Decode([]int32{tok}, engine.LogitsLast); err != nil {
						t.Fatal(err)
					}
				}
				if err := b.Decode(toks[2:2+n], engine.LogitsAll); err != nil {
					t.Fatal(err)
				}
				check(b, fmt.Sprintf("verify batch of %d", n))
				for j := range n {
					b.Logits(j, row)
					for v := range row {
						if math.Float32bits(row[v]) != math.Float32bits(single[2+j][v]) {
							t.Fatalf("%s: n=%d row %d logit %d: batch %g, single step %g", name, n, j, v, row[v], single[2+j][v])
						}
					}
				}
				b.Close()
			}
			// a prefill of all the tokens (more than EdgellmMaxN rows), where
			// the matmuls too are batch-invariant at every size (q4x4)
			if path != models[0] || !kernels.EdgellmQ4x4Available() {
				e.Close()
				continue
			}
			p, _ := e.NewSession(engine.SessionConfig{NCtx: 64, Attention: engine.AttentionEdgellm})
			if err := p.Decode(toks, engine.LogitsAll); err != nil {
				t.Fatal(err)
			}
			check(p, "prefill")
			for j := range toks {
				p.Logits(j, row)
				for v := range row {
					if math.Float32bits(row[v]) != math.Float32bits(single[j][v]) {
						t.Fatalf("%s: prefill row %d logit %d: %g, single step %g", name, j, v, row[v], single[j][v])
					}
				}
			}
			p.Close()
			e.Close()
		}
	}
}
