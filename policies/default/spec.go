package main

import (
	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/abi/specmodel"
)

// The throughput speculation controller (ABI 1.1). With the engine's
// measured acceptance by draft position and costs (a draft step c and a
// verify batch of n tokens v(n), both relative to one plain target step) it
// picks the K that maximises the expected tokens per unit of time,
//
//	rate(K) = E(K) / (K·c + v(K+1)),  E(K) = 1 + Σ_{i=1..K} Π_{j<i} α_j,
//
// and K = 0 (rate 1) when no K beats plain decoding by SpecMargin. At K = 0
// the engine measures no acceptance, so every SpecProbeCalls calls it
// probes with K = 1 for one call to refresh the readings. It also sets
// p_min: one more draft token is worth it when its acceptance (estimated by
// the draft's confidence) exceeds the time it costs, c + v(K+1) − v(K),
// times the tokens that time yields at the current rate.

const (
	// SpecMargin is how much a K must beat plain decoding (and the current
	// K) by to be chosen.
	SpecMargin = 0.03
	// SpecProbeCalls is how many calls at K = 0 pass between probes.
	SpecProbeCalls = 8
	// SpecPMinMax caps p_min.
	SpecPMinMax = 0.9
)

// specState is the controller's memory (in st).
type specState struct {
	offCalls int // calls at K = 0 since the last probe
}

// specRate sets K and p_min from the 1.1 sensors; false when they are
// absent (then the acceptance-window controller runs).
func specRate(s *abi.Sensors, d *abi.Decision, r *reason) bool {
	if !s.Has(abi.PresentSpecAccept|abi.PresentSpecCost|abi.PresentSpecKMax|abi.PresentCurrent) || s.SpecKMax <= 0 {
		return false
	}
	kMax := min(int(s.SpecKMax), abi.MaxSpecK)
	cur := int(s.CurSpecK)
	best, bestRate := 0, 1.0
	for k := 1; k <= kMax; k++ {
		if rt := specExpectedRate(s, k); rt > bestRate*(1+SpecMargin) || (k == cur && rt > bestRate) {
			best, bestRate = k, rt
		}
	}
	if cur > 0 && cur <= kMax && best != cur {
		// hysteresis: keep the current K unless the new one is clearly better
		if specExpectedRate(s, cur) >= bestRate/(1+SpecMargin) && specExpectedRate(s, cur) > 1 {
			best, bestRate = cur, specExpectedRate(s, cur)
		}
	}
	if best == 0 {
		st.spec.offCalls++
		if st.spec.offCalls >= SpecProbeCalls {
			st.spec.offCalls = 0
			best = 1 // probe: refresh acceptance and costs
		}
	} else {
		st.spec.offCalls = 0
	}
	if best > 0 {
		dv := specVerify(s, best+1) - specVerify(s, best)
		p := bestRate * (float64(s.SpecDraftCost) + max(0, dv))
		d.SpecPMin = float32(min(p, SpecPMinMax))
	}
	if int32(best) != s.CurSpecK {
		d.SpecK = int32(best)
		r.set(abi.ReasonSpeculation, "spec rate: k ")
		r.tierMove(s.CurSpecK, d.SpecK)
	}
	return true
}

// specExpectedRate is rate(K) in tokens per plain-step time
// (specmodel.ExpectedRate: the model the native engine's auto K uses too).
func specExpectedRate(s *abi.Sensors, k int) float64 {
	return specmodel.ExpectedRate(s.SpecAcceptByPos[:], s.SpecDraftCost, s.SpecVerifyCost[:], k)
}

// specVerify is v(n), extrapolated where unmeasured (specmodel.Verify).
func specVerify(s *abi.Sensors, n int) float64 { return specmodel.Verify(s.SpecVerifyCost[:], n) }
