package native

import (
	"fmt"
	"runtime"
	"sort"
	"strings"

	"github.com/edgellm/edgellm/kernels"
)

// Greedy speculation is exact (its text is plain decoding's, near-ties
// included) only when a verify batch gives every row the bits of a single
// step. The whole forward pass is batch-invariant once the weight matmuls
// are (TestOwnKernelsBatchInvariant: attention, norms and the head add no
// difference), so the question is which kernel each matrix runs:
//   - edgellm's (kernels.MulMatEdgellm: Q8_0, Q4_0, F32, F16, not
//     repacked): invariant by contract (kernels/matvec);
//   - ggml's unrepacked Q8_0/Q4_0 mul_mat on x86-64: measured invariant
//     (TestOwnKernelsBatchInvariant), an accident of ggml's vec_dot, not a
//     contract; on arm64 measured not invariant (kernels/RATIONALE.md);
//   - ggml's F32/F16 mul_mat: not invariant (one token and several take
//     different paths: every verify row of the F32 model differs);
//   - ggml's repacked kernels (gemv for one row, gemm for several): not
//     invariant by design;
//   - any other type: not measured, so not claimed.

// BatchInvariance says whether a session's verify batches give each row
// the single step's bits.
type BatchInvariance struct {
	Exact bool
	// Reason names the matrices whose kernels are not (known to be)
	// batch-invariant; "" when Exact.
	Reason string
	// EdgellmFixes: with Options.Kernels "edgellm" every matrix would run
	// a batch-invariant kernel.
	EdgellmFixes bool
}

// BatchInvariance reports whether greedy speculation on s is exact with its
// engine's kernels and its selected weights (the layers' matrices and the
// output head). A later SelectSet or SetRepackLayers can change the answer.
func (s *Session) BatchInvariance() BatchInvariance {
	mats := []kernels.Tensor{s.eng.sets[s.headSet].Output}
	for _, l := range s.layers {
		mats = append(mats, l.Matrices()...)
	}
	own := s.eng.opts.Kernels == KernelsEdgellm
	why := map[string]int{} // reason -> matrices
	fixes := true
	for _, m := range mats {
		if m.Nil() {
			continue
		}
		covered := kernels.EdgellmCovers(m.Type()) && !m.Repacked()
		fixes = fixes && covered
		if r := ggmlVariance(m, own && covered); r != "" {
			why[r]++
		}
	}
	if len(why) == 0 {
		return BatchInvariance{Exact: true}
	}
	reasons := make([]string, 0, len(why))
	for r, n := range why {
		reasons = append(reasons, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(reasons)
	return BatchInvariance{Reason: strings.Join(reasons, "; "), EdgellmFixes: fixes && !own}
}

// ggmlVariance is why matrix m's kernel is not known to be batch-invariant
// ("" when it is); ours: m runs edgellm's kernel.
func ggmlVariance(m kernels.Tensor, ours bool) string {
	t := m.Type()
	switch {
	case ours:
		return ""
	case m.Repacked():
		return fmt.Sprintf("repacked %s matrices (ggml's gemv for one token, gemm for several)", t)
	case t == kernels.GGMLTypeF32 || t == kernels.GGMLTypeF16:
		return fmt.Sprintf("%s matrices (ggml's %s mul_mat takes another path for one token than for several)", t, t)
	case (t == kernels.GGMLTypeQ8_0 || t == kernels.GGMLTypeQ4_0) && runtime.GOARCH == "amd64":
		return ""
	case t == kernels.GGMLTypeQ8_0 || t == kernels.GGMLTypeQ4_0:
		return fmt.Sprintf("%s matrices (ggml's %s mul_mat on %s: measured not batch-invariant on arm64)", t, t, runtime.GOARCH)
	}
	return fmt.Sprintf("%s matrices (ggml's kernel, batch invariance not measured)", t)
}
