package sharedtest

import (
	"fmt"
	"math"
)

// LogitsRelTol is the tolerance of CompareLogits, as a fraction of the
// logits' range (max − min of the reference row).
//
// Why a fraction of the range and not an absolute number: two paths that
// compute the same logits (a batch against one token at a time, say) run
// different ggml kernels: the batched matrix multiply tiles and orders its
// float32 sums differently from the one-row dot product, and the order also
// differs between AVX2 and AVX-512 builds. The rounding that reordering
// introduces is amplified through every layer (norms, softmax) and ends up
// proportional to the size of the logits, not a fixed number: 1e-3 absolute
// held on one Intel CPU and failed on an AMD Zen 4 (|4.22857 − 4.22969|).
// 1% of the range is far above any reordering (float32 eps is 6e-8) and far
// below what a real bug gives (a wrong position, mask or KV row moves logits
// by a large part of their range, and flips the top token).
const LogitsRelTol = 0.01

// CompareLogits checks got against want (the reference row): every logit
// within LogitsRelTol of want's range, and the same top-1 token unless
// want's two best logits are closer than twice that tolerance (then either
// is a legitimate argmax). It returns nil or an error naming the first
// difference.
func CompareLogits(got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d logits, want %d", len(got), len(want))
	}
	if len(want) == 0 {
		return nil
	}
	lo, hi := want[0], want[0]
	for _, v := range want {
		lo, hi = min(lo, v), max(hi, v)
	}
	tol := LogitsRelTol * float64(hi-lo)
	for j := range want {
		if d := math.Abs(float64(got[j] - want[j])); !(d <= tol) {
			return fmt.Errorf("logit %d: %g, want %g: |Δ| %.3g > %.3g (%.0f%% of the range %.3g)", j, got[j], want[j], d, tol, 100*LogitsRelTol, hi-lo)
		}
	}
	best, second := top2(want)
	if float64(want[best]-want[second]) > 2*tol {
		if g, _ := top2(got); g != best {
			return fmt.Errorf("top-1 token %d, want %d (reference margin %.3g > 2 × %.3g)", g, best, want[best]-want[second], tol)
		}
	}
	return nil
}

// top2 returns the indices of the largest and second-largest values.
func top2(v []float32) (best, second int) {
	best, second = 0, -1
	for i := 1; i < len(v); i++ {
		switch {
		case v[i] > v[best]:
			best, second = i, best
		case second < 0 || v[i] > v[second]:
			second = i
		}
	}
	if second < 0 {
		second = best
	}
	return best, second
}
