package native

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/fpenv"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/synth"
)

// l1bQuarter is llama3.2-1b's shape at a quarter of its width (16 layers,
// grouped-query attention 4:1, head dim 64, n_ff / n_embd = 4, llama3 RoPE
// factors, tied embeddings): the SYNTHETIC speculation pair's model at a
// size make test writes in about a second.
var l1bQuarter = synth.Shape{Name: "llama3.2-1b-quarter", NEmbd: 512, NLayer: 16, NHead: 8, NHeadKV: 2,
	NFF: 2048, NCtx: 4096, RopeBase: 500000, RMSEps: 1e-5, TiedEmbeddings: true, Llama3Rope: true}

// TestSynthNumerics: decoding both models of the SYNTHETIC speculation
// pair (the full random-weight model, and its copy whose layers ≥ 4 add
// nothing: synth.ZeroFrom) consumes no denormal operand, overflows nowhere
// and makes no NaN, on the decoding thread (at one thread ggml computes
// there), and its logits are finite with an RMS of order 1 (synth.plan's
// scaling). A denormal operand costs a microcode assist per operation on
// many x86 CPUs, which would make one model slower than the other for a
// reason that is not its size. Underflow (a tiny result) is allowed: the
// attention softmax's exp makes some on every step.
// EDGELLM_SYNTH_MODEL=FILE runs it on another model (the full-size
// `edgellm synth --shape llama3.2-1b --type q4_0` file).
func TestSynthNumerics(t *testing.T) {
	if !fpenv.Supported {
		t.Skip("floating-point flags are not read on " + runtime.GOARCH)
	}
	path := os.Getenv("EDGELLM_SYNTH_MODEL")
	if path == "" {
		path = synthModel(t, l1bQuarter, gguf.Q4_0)
	}
	zeroed := filepath.Join(t.TempDir(), "zero4.gguf")
	if err := synth.ZeroFrom(path, zeroed, 4); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, zeroed} {
		synthNumerics(t, p)
	}
}

func synthNumerics(t *testing.T, path string) {
	e, err := Load(path, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.NewSession(engine.SessionConfig{NCtx: 256, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const bad = fpenv.Denormal | fpenv.Invalid | fpenv.Overflow | fpenv.DivByZero
	logits := make([]float32, SessionOf(s).cfg.NVocab)
	tok := int32(1)
	for step := range 48 {
		batch := []int32{tok}
		if step == 0 {
			batch = []int32{1, 20, 30, 40, 50, 60, 70, 80}
		}
		fpenv.Clear()
		if err := s.Decode(batch, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if f := fpenv.Read(); f&bad != 0 {
			t.Fatalf("%s: step %d: floating-point flags %#x (denormal 0x2, invalid 0x1, overflow 0x8, div 0x4)", path, step, f)
		}
		if err := s.Logits(len(batch)-1, logits); err != nil {
			t.Fatal(err)
		}
		var ss float64
		best := 0
		for i, x := range logits {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("step %d: logit %d is %v", step, i, x)
			}
			ss += float64(x) * float64(x)
			if x > logits[best] {
				best = i
			}
		}
		// RMS ≈ 1 by construction; a factor 10 either way would mean
		// the scaling of the weights no longer holds.
		if rms := math.Sqrt(ss / float64(len(logits))); rms < 0.1 || rms > 10 {
			t.Fatalf("step %d: logits RMS %.3g, want within 0.1-10", step, rms)
		}
		tok = int32(best)
	}
	t.Logf("%s: no bad flag over 48 steps", path)
}
