package main

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/policy-sdk/policytest"
)

// repackEngine is engine() with repacked weights: 7 units (its 6 layers
// and the head), 557 MB of anonymous copies (as much as the SYNTHETIC
// llama3.2-1b Q4_0's).
func repackEngine() abi.Sensors {
	s := engine()
	s.Present |= abi.PresentRepack
	s.RepackLayersMax, s.RepackMBMax = 7, 557
	return s
}

// memSteps are n calls with this available memory against a 200 MB
// low-memory threshold (low band < 300, ample > 600); SIMULATED readings.
func memSteps(n int, availMB int32) []abi.Sensors {
	out := make([]abi.Sensors, n)
	for i := range out {
		out[i] = abi.Sensors{Present: abi.PresentMemAvailable | abi.PresentMemThreshold, MemAvailableMB: availMB, MemThresholdMB: 200}
	}
	return out
}

// repackChanges are the steps where the repacked units changed, and to what.
func repackChanges(steps []policytest.Step) (at []int, to []int32) {
	for k, st := range steps {
		if st.Decision.RepackLayers != st.Sensors.RepackLayers {
			at, to = append(at, k), append(to, st.Decision.RepackLayers)
		}
	}
	return at, to
}

func repackCases() []policytest.Case {
	start := start()
	start.RepackLayers = 7
	var lowThenAmple []abi.Sensors
	lowThenAmple = append(lowThenAmple, memSteps(10, 1000)...)
	lowThenAmple = append(lowThenAmple, memSteps(20, 250)...)
	lowThenAmple = append(lowThenAmple, memSteps(50, 1500)...)
	trim := memSteps(80, 1000)
	for i := 5; i < 8; i++ {
		trim[i].Present |= abi.PresentTrimLevel
		trim[i].TrimLevel = abi.TrimRunningCritical
	}
	return []policytest.Case{
		{
			// Memory low: the copy goes first and the tier waits a hold to
			// see it (these readings do not move, so after the hold the tier
			// steps down too); memory ample: the tier comes back first, the
			// copy a hold later.
			Name: "memory low then ample: repacked weights released before the tier, taken back after it",
			Base: repackEngine(), Start: start, Steps: lowThenAmple,
			After: func(t *testing.T, steps []policytest.Step) {
				at, to := repackChanges(steps)
				tiers := tierChanges(steps)
				if len(at) != 2 || at[0] != 10 || to[0] != 0 || to[1] != 7 {
					t.Fatalf("repack changes at %v to %v, want 7→0 at step 10, then back to 7", at, to)
				}
				if len(tiers) != 2 || tiers[0] != 10+TierHoldSteps || tiers[1] >= at[1] || at[1]-tiers[1] != TierHoldSteps {
					t.Fatalf("tier changes at %v, repack at %v: want the tier down a hold after the release and up a hold before the copy returns", tiers, at)
				}
				if d := steps[10].Decision; d.Tier != 0 || d.ReasonCode != abi.ReasonMemoryPressure {
					t.Errorf("step 10: tier %d, reason %d %q", d.Tier, d.ReasonCode, d.Reason())
				}
				if d := steps[at[1]].Decision; d.ReasonCode != abi.ReasonMemoryHeadroom {
					t.Errorf("step %d: reason %d %q", at[1], d.ReasonCode, d.Reason())
				}
			},
		},
		{
			// Ample (700 > 600) but not with the copy's 557 MB back (143 <
			// 300): it stays released.
			Name: "ample, but not with the copy back: stays released",
			Base: repackEngine(), Start: func() abi.Decision { d := start; d.RepackLayers = 0; return d }(),
			Steps: memSteps(60, 700),
			Check: func(t *testing.T, step int, s *abi.Sensors, d *abi.Decision) {
				if d.RepackLayers != 0 {
					t.Errorf("step %d: repacked %d units with %d MB available", step, d.RepackLayers, s.MemAvailableMB)
				}
			},
		},
		{
			// A critical trim level releases at once, even with ample
			// memory; after it the copy comes back once calm.
			Name: "critical trim: released at once",
			Base: repackEngine(), Start: start, Steps: trim,
			After: func(t *testing.T, steps []policytest.Step) {
				at, to := repackChanges(steps)
				if len(at) != 2 || at[0] != 5 || to[0] != 0 || to[1] != 7 || at[1] < 8+RecoverSteps-1 {
					t.Fatalf("repack changes at %v to %v, want 7→0 at step 5 and back after the emergency", at, to)
				}
			},
		},
		{
			// No repacked weights (no PresentRepack): the field is left.
			Name: "no repacked weights: field untouched",
			Base: engine(), Start: start, Steps: memSteps(20, 250),
			Check: func(t *testing.T, step int, s *abi.Sensors, d *abi.Decision) {
				if d.RepackLayers != 7 {
					t.Errorf("step %d: RepackLayers %d, want the pre-fill 7", step, d.RepackLayers)
				}
			},
		},
	}
}

func TestRepackNative(t *testing.T) {
	policytest.RunNative(t, Decide, repackCases(), policytest.WithReset(reset))
}

func TestRepackWasm(t *testing.T) {
	policytest.RunWasm(t, policytest.Build(t, "."), repackCases())
}
