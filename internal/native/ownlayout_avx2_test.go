package native

import (
	"slices"
	"testing"

	"github.com/edgellm/edgellm/kernels/matvec"
)

// TestOwnLayoutQ4x4AVX2: the engine-level q4x4 tests with the AVX2 q4x4
// kernel forced (what an AVX2-only CPU runs; matvec.ForceQ4x4AVX2), so this
// AVX-512 machine checks it too: the q4x4 copies are read and give the
// plain-block kernels' logits bitwise (TestOwnLayoutQ4x4), verify rows are
// bitwise the single steps (TestOwnKernelsBatchInvariant), so are prefill
// rows above 8 tokens (TestOwnLayoutQ4x4Prefill), and greedy text is
// ggml's (TestOwnKernelsGreedy). Where the CPU has AVX-VNNI, the first
// three run again with the kernel's AVX-VNNI lanes (bitwise the maddubs
// ones, so greedy text follows).
func TestOwnLayoutQ4x4AVX2(t *testing.T) {
	if !slices.Contains(matvec.Available(), matvec.AVX2) {
		t.Skip("q4x4 AVX2 kernel needs AVX2+FMA+F16C")
	}
	forces := map[string]func(bool){"maddubs": matvec.ForceQ4x4AVX2}
	if matvec.Q4x4AVXVNNIAvailable() {
		forces["avxvnni"] = matvec.ForceQ4x4AVXVNNI
	}
	for name, force := range forces {
		t.Run(name, func(t *testing.T) {
			force(true)
			defer force(false)
			if matvec.Q4x4Impl() != matvec.AVX2 {
				t.Fatalf("forced: Q4x4Impl %v", matvec.Q4x4Impl())
			}
			t.Run("layout", TestOwnLayoutQ4x4)
			t.Run("batch-invariant", TestOwnKernelsBatchInvariant)
			t.Run("prefill", TestOwnLayoutQ4x4Prefill)
			if name == "maddubs" {
				t.Run("greedy", TestOwnKernelsGreedy)
			}
		})
	}
}
