package main

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/policy-sdk/policytest"
)

// specSteps: 40 calls at acceptance 0.9 per position, 40 at 0.2, 40 at
// 0.9 again; a draft step costs 0.1 of a target step and a verify batch of
// n tokens 1 + 0.1·(n−1) (a bandwidth-bound machine).
func specSteps() []abi.Sensors {
	var out []abi.Sensors
	for i := range 120 {
		s := engine()
		s.Present |= abi.PresentSpecAccept | abi.PresentSpecCost | abi.PresentSpecKMax
		a := float32(0.9)
		if i >= 40 && i < 80 {
			a = 0.2
		}
		for p := range s.SpecAcceptByPos {
			s.SpecAcceptByPos[p] = a
		}
		s.SpecDraftCost = 0.1
		for n := range s.SpecVerifyCost {
			s.SpecVerifyCost[n] = 1 + 0.1*float32(n)
		}
		s.SpecKMax = abi.MaxSpecK
		out = append(out, s)
	}
	return out
}

func specCases() []policytest.Case {
	return []policytest.Case{{
		Name: "acceptance falls, K goes to 0, comes back", Steps: specSteps(), Base: engine(), Start: start(),
		Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
			if d.SpecK > 0 && (d.SpecPMin <= 0 || d.SpecPMin > SpecPMinMax) {
				t.Errorf("step %d: p_min %.3f outside (0, %.2f]", k, d.SpecPMin, SpecPMinMax)
			}
			if d.SpecK != s.CurSpecK && d.ReasonCode != abi.ReasonSpeculation {
				t.Errorf("step %d: K %d→%d with reason %d, want speculation", k, s.CurSpecK, d.SpecK, d.ReasonCode)
			}
		},
		After: func(t *testing.T, steps []policytest.Step) {
			// At α = 0.9, c = 0.1, v(n) = 1 + 0.1(n−1): rate(K) = 10(1 − 0.9^(K+1))/(1 + 0.2K),
			// 2.37 at K = 6 and 7 (the best), 1.58 at K = 1: K lands within the margin of the best.
			nearBest(t, "after 40 calls at acceptance 0.9", &steps[39])
			// At α = 0.2 no K pays: rate(1) = 1.2/1.2 = 1.
			zero := 0
			for _, s := range steps[41:80] {
				if s.Decision.SpecK == 0 {
					zero++
				} else if s.Decision.SpecK > 1 {
					t.Errorf("K %d at acceptance 0.2 (only probes of K = 1 allowed)", s.Decision.SpecK)
				}
			}
			if zero < 30 {
				t.Errorf("K = 0 in only %d of 39 calls at acceptance 0.2", zero)
			}
			nearBest(t, "after acceptance came back", &steps[119])
		},
	}}
}

// nearBest checks the step's K is within SpecMargin of the best rate.
func nearBest(t *testing.T, what string, st *policytest.Step) {
	t.Helper()
	best := 1.0
	for k := 1; k <= abi.MaxSpecK; k++ {
		best = max(best, specExpectedRate(&st.Sensors, k))
	}
	k := int(st.Decision.SpecK)
	if k == 0 || specExpectedRate(&st.Sensors, k) < best/(1+SpecMargin) {
		t.Errorf("K %s = %d: rate %.3f, best %.3f", what, k, specExpectedRate(&st.Sensors, k), best)
	}
}

func TestSpecRateNative(t *testing.T) {
	policytest.RunNative(t, Decide, specCases(), policytest.WithReset(reset))
}

// TestSpecExpectedRate checks the formula against hand-computed values.
func TestSpecExpectedRate(t *testing.T) {
	s := engine()
	for p := range s.SpecAcceptByPos {
		s.SpecAcceptByPos[p] = 0.5
	}
	s.SpecDraftCost = 0.5
	s.SpecVerifyCost[0], s.SpecVerifyCost[1] = 1, 1.5
	// K = 1: E = 1.5, cost = 0.5 + 1.5 = 2 → 0.75.
	if r := specExpectedRate(&s, 1); r < 0.7499 || r > 0.7501 {
		t.Errorf("rate(1) = %v, want 0.75", r)
	}
	// v(3) extrapolated: 1.5 + 0.5 = 2; K = 2: E = 1.75, cost 1 + 2 = 3.
	if r := specExpectedRate(&s, 2); r < 1.75/3-1e-4 || r > 1.75/3+1e-4 {
		t.Errorf("rate(2) = %v, want %v", r, 1.75/3)
	}
}
