// Package specmodel is the one definition of speculative decoding's rate
// and verify-cost model, over the ABI 1.1 speculation readings: the native
// engine's auto K (internal/native) and the default policy's controller
// (policies/default) both choose K with it. Pure Go without dependencies:
// it builds for GOOS=wasip1 and for the host.
//
// With acceptance α_i of the draft token at position i (given that the
// ones before it were accepted), the cost c of one draft step and v(n) of a
// verify batch of n tokens, both relative to one plain target step, a round
// of K drafts emits E(K) = 1 + Σ_{i<K} Π_{j≤i} α_j tokens in K·c + v(K+1)
// plain-step times, so
//
//	rate(K) = E(K) / (K·c + v(K+1)),  rate(0) = 1.
package specmodel

// ExpectedRate is rate(k) in tokens per plain-step time. accept[i] is α_i
// (positions with no measured acceptance, 0, take the last measured one),
// verify[n-1] is v(n) (0 where unmeasured: Verify extrapolates).
func ExpectedRate(accept []float32, draftCost float32, verify []float32, k int) float64 {
	if k <= 0 {
		return 1
	}
	e, prod, a := 1.0, 1.0, 0.0
	for i := 0; i < k && i < len(accept); i++ {
		if accept[i] > 0 || i == 0 {
			a = float64(accept[i])
		}
		prod *= a
		e += prod
	}
	return e / (float64(k)*float64(draftCost) + Verify(verify, k+1))
}

// Verify is v(n): verify[n-1] when measured, else extrapolated linearly
// from the largest measured n below it and the measured one before that
// (v(n) = n when only v(1) is known, or nothing: pessimistic). 0 for n < 1.
func Verify(verify []float32, n int) float64 {
	if n < 1 {
		return 0
	}
	if n <= len(verify) {
		if v := verify[n-1]; v > 0 {
			return float64(v)
		}
	}
	lo, lv, slope := 1, 1.0, 1.0
	for m := min(n-1, len(verify)); m >= 1; m-- {
		if v := verify[m-1]; v > 0 {
			lo, lv = m, float64(v)
			for p := m - 1; p >= 1; p-- {
				if w := verify[p-1]; w > 0 {
					slope = max(0, (lv-float64(w))/float64(m-p))
					break
				}
			}
			break
		}
	}
	return lv + slope*float64(n-lo)
}
