package native

import (
	"os"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/synth"
	"github.com/edgellm/edgellm/internal/synthtest"
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

// synths holds the synthetic models of this test binary; TestMain removes
// them.
var synths synthtest.Cache

// synthModel writes (once per test binary) a synthetic model of shape sh
// with weights of type typ and stories260K's vocabulary, and returns its
// path.
func synthModel(t testing.TB, sh synth.Shape, typ gguf.Type) string {
	t.Helper()
	return synths.Model(t, sh, typ, sharedtest.Stories260K(t))
}

// TestMain removes the synthetic models after the package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	synths.Close()
	os.Exit(code)
}
