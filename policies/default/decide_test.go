package main

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/policy-sdk/policytest"
)

const traces = "../../testdata/traces/"

// engine is the simulated engine's fixed facts: 4 tiers, 6 layers.
func engine() abi.Sensors {
	s := abi.Sensors{Present: abi.PresentTiers | abi.PresentLayerLatency, TiersAvailable: 4, LayerCount: 6}
	for i := 0; i < 6; i++ {
		s.LayerLatencyUS[i] = 100
	}
	return s
}

// start is the engine's state before the first call.
func start() abi.Decision {
	d := abi.Decision{Tier: 0, SpecK: 4, Window: 2048, Anchors: 4, Threads: 2, CadenceSteps: 1, KVType: abi.KVF16}
	for i := 0; i < 6; i++ {
		d.LayerBits[i] = 8
	}
	return d
}

// tierChanges returns the steps where the tier changed.
func tierChanges(steps []policytest.Step) []int {
	var out []int
	for k, st := range steps {
		if st.Decision.Tier != st.Sensors.CurTier {
			out = append(out, k)
		}
	}
	return out
}

func cases() []policytest.Case {
	return []policytest.Case{
		{
			Name: "thermal ramp", Trace: traces + "thermal_ramp.jsonl", Base: engine(), Start: start(),
			After: func(t *testing.T, steps []policytest.Step) {
				seen := abi.ThermalNone
				for k, st := range steps {
					s, d := &st.Sensors, &st.Decision
					rise := s.ThermalStatus >= abi.ThermalModerate && s.ThermalStatus > seen
					if rise {
						want := min(s.CurTier+1, s.TiersAvailable-1)
						if d.Tier != want {
							t.Errorf("step %d: thermal rose to %v, tier %d→%d, want %d at once", k, s.ThermalStatus, s.CurTier, d.Tier, want)
						}
						if d.Tier != s.CurTier && d.ReasonCode != abi.ReasonThermal {
							t.Errorf("step %d: reason %d %q, want thermal", k, d.ReasonCode, d.Reason())
						}
					}
					if s.ThermalStatus >= abi.ThermalModerate && d.Tier < s.CurTier {
						t.Errorf("step %d: tier raised %d→%d while thermal %v", k, s.CurTier, d.Tier, s.ThermalStatus)
					}
					if s.ThermalStatus >= abi.ThermalModerate {
						seen = max(seen, s.ThermalStatus)
					} else {
						seen = s.ThermalStatus
					}
				}
				if got := steps[24].Decision.Tier; got != 3 {
					t.Errorf("tier at CRITICAL = %d, want 3 (lowest)", got)
				}
				if got := steps[len(steps)-1].Decision.Tier; got != 0 {
					t.Errorf("after cooling, tier = %d, want back to 0", got)
				}
				ch := tierChanges(steps)
				for i := 1; i < len(ch); i++ {
					if steps[ch[i]].Decision.ReasonCode == abi.ReasonMemoryHeadroom && ch[i]-ch[i-1] < TierHoldSteps {
						t.Errorf("upshift at %d only %d steps after the change at %d", ch[i], ch[i]-ch[i-1], ch[i-1])
					}
				}
			},
		},
		{
			Name: "memory oscillating around threshold", Trace: traces + "memory_oscillating.jsonl", Base: engine(), Start: start(),
			After: func(t *testing.T, steps []policytest.Step) {
				ch := tierChanges(steps)
				if len(ch) < 2 {
					t.Fatalf("tier changed %d times, want ≥ 2 (the trace crosses both bands)", len(ch))
				}
				if len(ch) > len(steps)/TierHoldSteps+1 {
					t.Errorf("tier changed %d times in %d steps: flapping", len(ch), len(steps))
				}
				for i := 1; i < len(ch); i++ {
					if ch[i]-ch[i-1] < TierHoldSteps {
						t.Errorf("tier changes at steps %d and %d: closer than %d", ch[i-1], ch[i], TierHoldSteps)
					}
				}
				for _, k := range ch {
					if c := steps[k].Decision.ReasonCode; c != abi.ReasonMemoryPressure && c != abi.ReasonMemoryHeadroom {
						t.Errorf("step %d: reason %d %q, want a memory reason", k, c, steps[k].Decision.Reason())
					}
				}
			},
		},
		{
			Name: "cgroup usage near limit", Trace: traces + "cgroup_pressure.jsonl", Base: engine(), Start: start(),
			After: func(t *testing.T, steps []policytest.Step) {
				down, up := -1, -1
				for k, st := range steps {
					u := float32(st.Sensors.CgroupUsageMB) / float32(st.Sensors.CgroupLimitMB)
					if st.Decision.Tier > st.Sensors.CurTier {
						down = k
						if u <= CgroupHigh {
							t.Errorf("step %d: downshift at usage %.2f", k, u)
						}
					}
					if st.Decision.Tier < st.Sensors.CurTier {
						up = k
						if u >= CgroupLow {
							t.Errorf("step %d: upshift at usage %.2f", k, u)
						}
					}
				}
				if down < 0 || up < down+TierHoldSteps {
					t.Errorf("downshift at %d, upshift at %d: want both, %d+ steps apart", down, up, TierHoldSteps)
				}
			},
		},
		{
			Name: "trim critical and low memory", Trace: traces + "trim_critical.jsonl", Base: engine(), Start: start(),
			Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
				crit := criticalTrim(s.TrimLevel) || s.LowMemory
				if crit && d.Window != EmergencyWindow {
					t.Errorf("step %d: trim %d low %v: window %d, want %d", k, s.TrimLevel, s.LowMemory, d.Window, EmergencyWindow)
				}
				if crit && s.CurWindow != EmergencyWindow && d.ReasonCode != abi.ReasonLowMemory {
					t.Errorf("step %d: reason %d %q, want low memory", k, d.ReasonCode, d.Reason())
				}
				if s.TrimLevel == abi.TrimUIHidden && d.Window != s.CurWindow {
					t.Errorf("step %d: UI_HIDDEN changed the window %d→%d", k, s.CurWindow, d.Window)
				}
			},
			After: func(t *testing.T, steps []policytest.Step) {
				for _, k := range []int{9, 60, 159} {
					if w := steps[k].Decision.Window; w != 2048 {
						t.Errorf("step %d: window %d, want 2048 (before / restored after the emergency)", k, w)
					}
				}
				if w := steps[20+RecoverSteps-2].Decision.Window; w != EmergencyWindow {
					t.Errorf("window restored before %d calm steps (%d)", RecoverSteps, w)
				}
			},
		},
		{
			Name: "acceptance high then low", Trace: traces + "acceptance_high_low.jsonl", Base: engine(), Start: start(),
			Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
				if d.SpecK < MinK || d.SpecK > MaxK {
					t.Errorf("step %d: K %d outside [%d, %d]", k, d.SpecK, MinK, MaxK)
				}
				if d.SpecK > s.CurSpecK && s.AcceptRate <= AcceptHigh || d.SpecK < s.CurSpecK && s.AcceptRate >= AcceptLow+0.2 {
					t.Errorf("step %d: K %d→%d at acceptance %.2f", k, s.CurSpecK, d.SpecK, s.AcceptRate)
				}
				if d.SpecK != s.CurSpecK && d.ReasonCode != abi.ReasonSpeculation {
					t.Errorf("step %d: reason %d, want speculation", k, d.ReasonCode)
				}
			},
			After: func(t *testing.T, steps []policytest.Step) {
				if k := steps[39].Decision.SpecK; k != MaxK {
					t.Errorf("K after 40 high-acceptance steps = %d, want %d", k, MaxK)
				}
				if k := steps[99].Decision.SpecK; k != MinK {
					t.Errorf("K after 60 low-acceptance steps = %d, want %d", k, MinK)
				}
				if k := steps[119].Decision.SpecK; k != MinK {
					t.Errorf("K in the dead band moved to %d", k)
				}
			},
		},
		{
			Name: "throughput under then over target", Trace: traces + "throughput_under_target.jsonl", Base: engine(), Start: start(),
			Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
				for i := 0; i < 6; i++ {
					b, c := d.LayerBits[i], s.CurLayerBits[i]
					switch {
					case b < c && s.TokPerSecSmoothed >= TargetTokPerSec:
						t.Errorf("step %d: layer %d lowered at %.0f tok/s", k, i, s.TokPerSecSmoothed)
					case b > c && (s.TokPerSecSmoothed <= TargetTokPerSec || s.ThermalStatus >= abi.ThermalModerate):
						t.Errorf("step %d: layer %d raised at %.0f tok/s thermal %v", k, i, s.TokPerSecSmoothed, s.ThermalStatus)
					case b < MinLayerBits || b > MaxLayerBits:
						t.Errorf("step %d: layer %d at %d bits", k, i, b)
					}
				}
			},
			After: func(t *testing.T, steps []policytest.Step) {
				// Lowering starts in the middle (layer 3 of 0..5); edges last.
				if b := steps[0].Decision.LayerBits; b[3] != 6 || b[0] != 8 || b[5] != 8 {
					t.Errorf("first lowering: bits %v, want layer 3 first", b[:6])
				}
				if b := steps[39].Decision.LayerBits; b[3] != MinLayerBits || b[0] != 8 || b[5] != 8 {
					t.Errorf("after 40 slow steps: bits %v", b[:6])
				}
				if b := steps[79].Decision.LayerBits; b != start().LayerBits {
					t.Errorf("after 40 fast cool steps: bits %v, want all back to 8", b[:6])
				}
			},
		},
		// Step-driven cases.
		{
			Name: "no readings: no change", Base: engine(), Start: start(),
			Steps: []abi.Sensors{{}, {}, {}},
			Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
				want := start()
				if *d != want {
					t.Errorf("step %d: decision changed without readings: %+v", k, *d)
				}
			},
		},
		{
			Name: "severe at lowest tier stays", Base: engine(), Start: func() abi.Decision { d := start(); d.Tier = 3; return d }(),
			Steps: []abi.Sensors{{Present: abi.PresentThermalStatus, ThermalStatus: abi.ThermalSevere}},
			Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
				if d.Tier != 3 {
					t.Errorf("tier %d, want 3 (no tier below)", d.Tier)
				}
			},
		},
		{
			Name: "window already below emergency", Base: engine(), Start: func() abi.Decision { d := start(); d.Window = 128; return d }(),
			Steps: []abi.Sensors{{Present: abi.PresentLowMemory, LowMemory: true}},
			Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
				if d.Window != 128 {
					t.Errorf("window %d, want 128 kept", d.Window)
				}
			},
		},
		{
			Name: "full-context window shrinks", Base: engine(), Start: func() abi.Decision { d := start(); d.Window = 0; return d }(),
			Steps: []abi.Sensors{{Present: abi.PresentTrimLevel, TrimLevel: abi.TrimComplete}},
			Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
				if d.Window != EmergencyWindow || d.Reason() != "trim 80: window full→256" {
					t.Errorf("window %d reason %q", d.Window, d.Reason())
				}
			},
		},
		{
			// A step down that frees more than the gap between the bands
			// (scenario memory-hog): going back up would land straight in
			// the low band, so the policy stays down until usage really falls.
			Name: "no bounce back into the low band", Base: engine(), Start: start(),
			Steps: func() []abi.Sensors {
				cg := func(used int32) abi.Sensors {
					return abi.Sensors{Present: abi.PresentCgroupLimit | abi.PresentCgroupUsage, CgroupLimitMB: 350, CgroupUsageMB: used}
				}
				steps := []abi.Sensors{cg(330)} // 94%: down
				for i := 0; i < 40; i++ {
					steps = append(steps, cg(240)) // 69% after the step: ample, but +90 → 94%
				}
				for i := 0; i < 40; i++ {
					steps = append(steps, cg(150)) // really fallen: 43%, +90 → 69%
				}
				return steps
			}(),
			After: func(t *testing.T, steps []policytest.Step) {
				if d := steps[0].Decision.Tier; d != 1 {
					t.Fatalf("step 0: tier %d, want 1 (memory low)", d)
				}
				for k := 1; k <= 40; k++ {
					if d := steps[k].Decision.Tier; d != 1 {
						t.Fatalf("step %d: tier %d, want to stay on 1 (going up would refill the cgroup)", k, d)
					}
				}
				if d := steps[80].Decision.Tier; d != 0 {
					t.Fatalf("after usage fell: tier %d, want 0", d)
				}
			},
		},
		{
			Name: "memory by total when no threshold", Base: engine(), Start: start(),
			Steps: []abi.Sensors{{Present: abi.PresentMemAvailable | abi.PresentMemTotal, MemAvailableMB: 500, MemTotalMB: 8000}},
			Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
				if d.Tier != 1 || d.ReasonCode != abi.ReasonMemoryPressure {
					t.Errorf("tier %d reason %d %q, want 1 memory pressure", d.Tier, d.ReasonCode, d.Reason())
				}
			},
		},
	}
}

func TestNative(t *testing.T) {
	policytest.RunNative(t, Decide, append(cases(), threadCases()...), policytest.WithReset(reset))
}

func TestWasm(t *testing.T) {
	policytest.RunWasm(t, policytest.Build(t, "."), append(cases(), threadCases()...))
}

func TestDecideNoAlloc(t *testing.T) {
	reset()
	defer reset()
	s := engine()
	s.Present |= abi.PresentCurrent | abi.PresentThermalStatus | abi.PresentTokPerSecSmoothed | abi.PresentAcceptRate | abi.PresentLowMemory
	s.LowMemory, s.TokPerSecSmoothed, s.AcceptRate, s.CurSpecK, s.CurWindow = true, 5, 0.9, 4, 2048
	for i := range 6 {
		s.CurLayerBits[i] = 8
	}
	d := start()
	n := testing.AllocsPerRun(1000, func() {
		s.Step++
		s.ThermalStatus = abi.ThermalStatus(s.Step % 7)
		dd := d
		Decide(&s, &dd)
	})
	if n != 0 {
		t.Fatalf("Decide allocates %v times per call", n)
	}
}

func TestLayerOrder(t *testing.T) {
	bits := [6]uint8{8, 8, 8, 8, 8, 8}
	var order []int
	for range 18 {
		best := -1
		for i := range 6 {
			if lowerBits(bits[i]) != bits[i] && (best < 0 || rank(i, 6) >= rank(best, 6)) {
				best = i
			}
		}
		if len(order) == 0 || order[len(order)-1] != best {
			order = append(order, best)
		}
		bits[best] = lowerBits(bits[best])
	}
	want := []int{3, 2, 4, 1, 5, 0}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
	for _, tc := range []struct{ in, lo, hi uint8 }{{8, 6, 8}, {6, 5, 8}, {5, 4, 6}, {4, 4, 5}, {16, 8, 16}, {7, 6, 8}, {3, 3, 4}} {
		if lowerBits(tc.in) != tc.lo || raiseBits(tc.in) != tc.hi {
			t.Errorf("bits %d: lower %d raise %d, want %d %d", tc.in, lowerBits(tc.in), raiseBits(tc.in), tc.lo, tc.hi)
		}
	}
}
