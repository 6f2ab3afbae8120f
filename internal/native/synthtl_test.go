package native

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/synth"
)

// tinyLlamaQuarter is TinyLlama 1.1B's shape at a quarter of its width, so
// that make test can synthesize it in about a second: the same 22 layers,
// head dim 64, grouped-query attention with 8 query heads per KV head
// (TinyLlama: 32 and 4), n_ff / n_embd = 2.75 (5632 / 2048), RoPE base
// 10000, untied output. Its graph has the same nodes as the full model's,
// which is what a layer-set switch rebuilds; only the tensors are smaller
// (60.5 M parameters: 64 MB at Q8_0, 34 MB at Q4_0, with stories260K's
// 512-token vocabulary). The full shape runs under make soak
// (TestSoakSwitchCostTinyLlamaFull).
var tinyLlamaQuarter = synth.Shape{Name: "tinyllama-quarter", NEmbd: 512, NLayer: 22, NHead: 8, NHeadKV: 1,
	NFF: 1408, NCtx: 2048, RopeBase: 10000, RMSEps: 1e-5}

// synthCache holds the synthetic models of this test binary, written once
// into one temp dir that TestMain removes.
var synthCache struct {
	mu    sync.Mutex
	dir   string
	files map[string]string
}

// synthModel writes (once per test binary) a synthetic model of shape sh
// with weights of type typ, seed 1 and stories260K's vocabulary, and returns
// its path. Two types of one shape share their base weights (same seed), as
// a real quantization ladder does.
func synthModel(t testing.TB, sh synth.Shape, typ gguf.Type) string {
	t.Helper()
	vocab := sharedtest.Stories260K(t)
	synthCache.mu.Lock()
	defer synthCache.mu.Unlock()
	key := sh.Name + "-" + typ.String()
	if p, ok := synthCache.files[key]; ok {
		return p
	}
	if synthCache.dir == "" {
		d, err := os.MkdirTemp("", "edgellm-native-synth-")
		if err != nil {
			t.Fatal(err)
		}
		synthCache.dir, synthCache.files = d, map[string]string{}
	}
	p := filepath.Join(synthCache.dir, key+".gguf")
	if err := synth.Write(context.Background(), synth.Options{Shape: sh, Type: typ, VocabPath: vocab, Seed: 1, Out: p}, nil); err != nil {
		os.Remove(p)
		t.Fatal(err)
	}
	synthCache.files[key] = p
	return p
}

// TestMain removes the synthetic models after the package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if synthCache.dir != "" {
		os.RemoveAll(synthCache.dir)
	}
	os.Exit(code)
}
