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

// TestOwnLayoutQ4x4: with Kernels "edgellm" on an AVX-512 VNNI CPU, every
// plain Q4_0 matrix gets a q4x4 copy (reported as anonymous memory with
// repack's), decode and verify read it, and the logits of single steps and
// of a verify batch are bitwise those of the plain-block kernels (the same
// engine options with the copies dropped). Decode steps allocate nothing.
func TestOwnLayoutQ4x4(t *testing.T) {
	if !kernels.EdgellmQ4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	toks := []int32{1, 403, 407, 261, 378, 414, 270}
	for _, path := range []string{
		filepath.Join(sharedtest.Dir(), "models", "derived", "stories260K-ff192-Q4_0.gguf"),
		synthModel(t, l1bQuarter, gguf.Q4_0),
	} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var logits [2][][]float32
			for i := range 2 {
				e, err := Load(path, Options{Threads: 2, NoVocab: true, Kernels: KernelsEdgellm})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				st := e.Report().OwnLayout
				if i == 0 {
					if st.Tensors == 0 || st.Bytes <= 0 || e.Info().RepackBytes < st.Bytes || e.Info().RepackTensors < st.Tensors {
						t.Fatalf("own layout %+v, info repack %d bytes %d tensors", st, e.Info().RepackBytes, e.Info().RepackTensors)
					}
				} else if _, err := e.SetRepackLayers(0); err != nil { // the plain-block kernels
					t.Fatal(err)
				}
				logits[i] = ownLayoutRun(t, e, toks)
			}
			for r := range logits[0] {
				for v := range logits[0][r] {
					if a, b := logits[0][r][v], logits[1][r][v]; math.Float32bits(a) != math.Float32bits(b) {
						t.Fatalf("row %d logit %d: q4x4 %g, plain blocks %g", r, v, a, b)
					}
				}
			}
			// The graph reads the copies: zeroed, the logits change.
			e, err := Load(path, Options{Threads: 2, NoVocab: true, Kernels: KernelsEdgellm})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			clearOwnCopies(e)
			z := ownLayoutRun(t, e, toks[:1])
			same := true
			for v := range z[0] {
				same = same && math.Float32bits(z[0][v]) == math.Float32bits(logits[1][0][v])
			}
			if same {
				t.Fatal("zeroed q4x4 copies left the logits unchanged: the graph does not read them")
			}
		})
	}
}

// ownLayoutRun decodes toks one by one (rows 0..len-1), then toks[2:] as
// one verify batch after the first two (rows len..), and checks a decode
// step allocates nothing.
func ownLayoutRun(t *testing.T, e *Engine, toks []int32) [][]float32 {
	t.Helper()
	nv := e.Config().NVocab
	var out [][]float32
	s, err := e.NewSession(engine.SessionConfig{NCtx: 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		out = append(out, make([]float32, nv))
		s.Logits(0, out[len(out)-1])
	}
	s.Close()
	if len(toks) < 3 {
		return out
	}
	b, _ := e.NewSession(engine.SessionConfig{NCtx: 64})
	defer b.Close()
	for _, tok := range toks[:2] {
		if err := b.Decode([]int32{tok}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Decode(toks[2:], engine.LogitsAll); err != nil {
		t.Fatal(err)
	}
	for j := range len(toks) - 2 {
		out = append(out, make([]float32, nv))
		b.Logits(j, out[len(out)-1])
	}
	tok := []int32{toks[0]}
	if a := testing.AllocsPerRun(20, func() { _ = b.Decode(tok, engine.LogitsLast) }); a != 0 {
		t.Fatalf("%v allocations per decode step, want 0", a)
	}
	return out
}

// clearOwnCopies zeroes every q4x4 copy of e's weight sets.
func clearOwnCopies(e *Engine) {
	for _, w := range e.sets {
		clear(w.ownMem)
	}
}
