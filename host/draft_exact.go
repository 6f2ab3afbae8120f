package host

// BatchInvariance says whether greedy speculation on a session is exact: a
// verify batch gives every row the bits of a single step, so the text is
// plain greedy decoding's even where the top two logits nearly tie. When
// it is not, a near-tie can resolve one way in a verify batch and the
// other in a plain step, and the texts part there (then continue, each
// consistent with itself).
type BatchInvariance struct {
	Exact bool
	// Reason names the matrices whose kernels are not (known to be)
	// batch-invariant, e.g. "37 f32 matrices (ggml's f32 mul_mat takes
	// another path for one token than for several)"; "" when Exact.
	Reason string
	// EdgellmFixes: loading the model with LoadOptions.Kernels "edgellm"
	// would make every matrix run a batch-invariant kernel (plain decoding
	// then uses the same kernels, so both texts are that engine's).
	EdgellmFixes bool
}

// BatchInvariance reports whether greedy speculation on the Draft's
// session is exact with the engine's kernels and the session's selected
// weights (kernels/RATIONALE.md lists which kernels are). Sampling at a
// temperature is unaffected: rejection sampling keeps the model's
// distribution whatever the last bits of the logits.
func (d *Draft) BatchInvariance() BatchInvariance {
	bi := d.sess.BatchInvariance()
	return BatchInvariance{Exact: bi.Exact, Reason: bi.Reason, EdgellmFixes: bi.EdgellmFixes}
}
