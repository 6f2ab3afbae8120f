package main

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/policy-sdk/policytest"
)

// draftMemSteps is a SIMULATED memory trace with a draft that holds 12 MiB
// attached: MemAvailable 3000 MiB over a 500 MiB threshold (ample) at
// token positions 0–39, 600 MiB (low: 1.2× the threshold) at 40–79, 3000
// again from 80. One call per token position.
func draftMemSteps(n int) []abi.Sensors {
	out := make([]abi.Sensors, n)
	for i := range out {
		s := &out[i]
		s.Present = abi.PresentMemAvailable | abi.PresentMemThreshold | abi.PresentDraft | abi.PresentTiers
		s.TiersAvailable = 1
		s.MemThresholdMB, s.MemAvailableMB = 500, 3000
		if i >= 40 && i < 80 {
			s.MemAvailableMB = 600 // SIMULATED pressure
		}
		s.DraftState, s.DraftMB = abi.DraftAttached, 12
	}
	return out
}

type draftMove struct{ step, from, to int32 }

func draftMoves(steps []policytest.Step) []draftMove {
	var out []draftMove
	for k := 1; k < len(steps); k++ {
		if a, b := steps[k-1].Sensors.DraftState, steps[k].Sensors.DraftState; a != b {
			out = append(out, draftMove{int32(k), a, b})
		}
	}
	return out
}

func draftCases() []policytest.Case {
	return []policytest.Case{{
		// Issue #30.5: the draft is dropped at the first low reading (its
		// 12 MiB freed: draft_mb 12 → 0) and attached again at the first
		// ample one, no hold pending (the drop's hold of TierHoldSteps
		// ended at position 56).
		Name:  "draft: dropped under memory pressure, back when memory recovers",
		Steps: draftMemSteps(120),
		Start: abi.Decision{Window: 2048, Threads: 2, CadenceSteps: 1},
		After: func(t *testing.T, steps []policytest.Step) {
			ms := draftMoves(steps)
			want := []draftMove{{41, abi.DraftAttached, abi.DraftDetached}, {81, abi.DraftDetached, abi.DraftAttached}}
			if len(ms) != 2 || ms[0] != want[0] || ms[1] != want[1] {
				t.Fatalf("draft state changes %v, want %v", ms, want)
			}
			if mb := steps[60].Sensors.DraftMB; mb != 0 {
				t.Fatalf("draft_mb %v while detached", mb)
			}
			if mb := steps[39].Sensors.DraftMB; mb != 12 {
				t.Fatalf("draft_mb %v before the drop", mb)
			}
		},
	}, {
		// No draft configured: draft_state 0 is never asked to change.
		Name: "draft: none configured, nothing asked",
		Steps: func() []abi.Sensors {
			s := draftMemSteps(60)
			for i := range s {
				s[i].DraftState, s[i].DraftMB = abi.DraftNone, 0
			}
			return s
		}(),
		Start: abi.Decision{Window: 2048, Threads: 2, CadenceSteps: 1},
		After: func(t *testing.T, steps []policytest.Step) {
			if ms := draftMoves(steps); len(ms) != 0 {
				t.Fatalf("draft state changes %v without a draft", ms)
			}
		},
	}}
}

func TestDraftNative(t *testing.T) {
	policytest.RunNative(t, Decide, draftCases(), policytest.WithReset(reset))
}

func TestDraftWasm(t *testing.T) {
	policytest.RunWasm(t, policytest.Build(t, "."), draftCases())
}
