package main

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/policy-sdk/policytest"
)

// manifestSteps is n calls on a 4-layer model with a manifest: sensitivity
// ranks 0,3,1,2 (layer 1 the least sensitive), min bits 8,4,5,4, max 8; tps
// and per-layer latency from the callbacks.
func manifestSteps(n int, f func(i int, s *abi.Sensors)) []abi.Sensors {
	out := make([]abi.Sensors, n)
	for i := range out {
		s := &out[i]
		s.Present = abi.PresentManifest | abi.PresentTiers | abi.PresentTokPerSecSmoothed | abi.PresentLayerLatency
		s.TiersAvailable, s.LayerCount = 1, 4
		copy(s.LayerSensRank[:], []uint8{0, 3, 1, 2})
		copy(s.LayerMinBits[:], []uint8{8, 4, 5, 4})
		copy(s.LayerMaxBits[:], []uint8{8, 8, 8, 8})
		for l := 0; l < 4; l++ {
			s.LayerLatencyUS[l] = 100
		}
		f(i, s)
	}
	return out
}

func bitsStart(b uint8) abi.Decision {
	d := abi.Decision{Window: 2048, Threads: 2, CadenceSteps: 1}
	for i := 0; i < 4; i++ {
		d.LayerBits[i] = b
	}
	return d
}

// moves lists (step, layer, from, to) of every per-layer change.
type move struct{ step, layer, from, to int }

func moves(steps []policytest.Step) []move {
	var out []move
	for k, st := range steps {
		for l := 0; l < 4; l++ {
			if a, b := st.Sensors.CurLayerBits[l], st.Decision.LayerBits[l]; a != b {
				out = append(out, move{k, l, int(a), int(b)})
			}
		}
	}
	return out
}

func precisionCases() []policytest.Case {
	return []policytest.Case{{
		Name:  "manifest: slow demotes least sensitive first, never below min_bits",
		Steps: manifestSteps(60, func(_ int, s *abi.Sensors) { s.TokPerSecSmoothed = 5 }),
		Start: bitsStart(8),
		After: func(t *testing.T, steps []policytest.Step) {
			ms := moves(steps)
			// floors 8,4,5,4 from 8 on the ladder 8,6,5,4: layer 1 (rank 3)
			// to 4, then layer 3 (rank 2) to 4, then layer 2 (rank 1) to 5.
			want := []move{{0, 1, 8, 6}, {4, 1, 6, 5}, {8, 1, 5, 4}, {12, 3, 8, 6}, {16, 3, 6, 5}, {20, 3, 5, 4}, {24, 2, 8, 6}, {28, 2, 6, 5}}
			if len(ms) != len(want) {
				t.Fatalf("moves %v, want %v", ms, want)
			}
			for i := range ms {
				if ms[i] != want[i] {
					t.Fatalf("move %d: %v, want %v (all: %v)", i, ms[i], want[i], ms)
				}
			}
		},
	}, {
		Name: "manifest: the app's tok/s target; fast promotes most sensitive first",
		Steps: manifestSteps(12, func(_ int, s *abi.Sensors) {
			s.TokPerSecSmoothed = 5 // below the default 15, above the app's 4
			s.TokPerSecTarget, s.Present = 4, s.Present|abi.PresentTokTarget
		}),
		Start: bitsStart(4),
		After: func(t *testing.T, steps []policytest.Step) {
			ms := moves(steps)
			// layer 0 (rank 0) 4→5→6→8, then layer 2 (rank 1).
			want := []move{{0, 0, 4, 5}, {4, 0, 5, 6}, {8, 0, 6, 8}}
			if len(ms) != len(want) || ms[0] != want[0] || ms[1] != want[1] || ms[2] != want[2] {
				t.Fatalf("moves %v, want %v", ms, want)
			}
		},
	}, {
		Name: "manifest: a latency spike drops that layer to min_bits at once",
		Steps: manifestSteps(8, func(i int, s *abi.Sensors) {
			s.TokPerSecSmoothed = 15 // in band: no throughput move
			for l := 0; l < 4; l++ {
				s.LayerLatencyUS[l] = 100 + float32(i%2) // a new sample each call
			}
			if i == 5 {
				s.LayerLatencyUS[3] = 160 // ≥ 1.5 × its moving average
			}
		}),
		Start: bitsStart(8),
		After: func(t *testing.T, steps []policytest.Step) {
			ms := moves(steps)
			if len(ms) != 1 || ms[0] != (move{5, 3, 8, 4}) {
				t.Fatalf("moves %v, want only layer 3 8→4 at step 5", ms)
			}
		},
	}, {
		// Issue #30: context growth (every layer 18 → 80 µs over 400 steps)
		// and the verify batch changing with K (every layer ×1–×6 on some
		// steps) move no layer; then a SIMULATED 2× slowdown of layer 1
		// alone from step 300 is caught at that step (N = 1 sample).
		Name: "manifest: context growth and K changes are no spike; one slow layer is",
		Steps: manifestSteps(400, func(i int, s *abi.Sensors) {
			s.TokPerSecSmoothed = 15 // in band: no throughput move
			k := []float32{1, 3, 6, 2, 5}[(i/7)%5]
			for l := 0; l < 4; l++ {
				s.LayerLatencyUS[l] = (18 + 62*float32(i)/400) * k * (1 + 0.05*float32(l))
			}
			if i >= 300 {
				s.LayerLatencyUS[1] *= 2 // SIMULATED
			}
		}),
		Start: bitsStart(8),
		After: func(t *testing.T, steps []policytest.Step) {
			ms := moves(steps)
			if len(ms) != 1 || ms[0] != (move{300, 1, 8, 4}) {
				t.Fatalf("moves %v, want only layer 1 8→4 at step 300", ms)
			}
		},
	}, {
		Name: "manifest: thermal moderate lowers the precision budget",
		Steps: manifestSteps(40, func(_ int, s *abi.Sensors) {
			s.TokPerSecSmoothed = 30 // fast: would promote if cool
			s.ThermalStatus, s.Present = abi.ThermalModerate, s.Present|abi.PresentThermalStatus
		}),
		Start: bitsStart(8),
		After: func(t *testing.T, steps []policytest.Step) {
			for k, st := range moves(steps) {
				if st.to > st.from {
					t.Fatalf("move %d promoted while hot: %+v", k, st)
				}
			}
			last := steps[len(steps)-1].Decision.LayerBits
			sum := 0
			for l := 0; l < 4; l++ {
				sum += int(last[l])
			}
			if float32(sum)/4 > HotBudgetBits {
				t.Fatalf("mean bits %v above the hot budget %d: %v", float32(sum)/4, HotBudgetBits, last[:4])
			}
		},
	}}
}

func TestPrecisionNative(t *testing.T) {
	policytest.RunNative(t, Decide, precisionCases(), policytest.WithReset(reset))
}

func TestPrecisionWasm(t *testing.T) {
	policytest.RunWasm(t, policytest.Build(t, "."), precisionCases())
}
