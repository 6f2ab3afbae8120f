package main

import (
	"os"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/policy-sdk/policytest"
)

const traces = "../../testdata/traces/"

// engine: 4 tiers, 6 layers.
func engine() abi.Sensors {
	return abi.Sensors{Present: abi.PresentTiers, TiersAvailable: 4, LayerCount: 6}
}

func start() abi.Decision { return abi.Decision{Window: 2048, KVType: abi.KVF16} }

// check holds for every step of every case: the rules of main.go / tiers.ts.
func check(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
	last := s.TiersAvailable - 1
	emergency := (s.Present&abi.PresentLowMemory != 0 && s.LowMemory) ||
		(s.Present&abi.PresentTrimLevel != 0 && s.TrimLevel >= abi.TrimRunningCritical)
	head := s.MemAvailableMB - s.MemThresholdMB
	hot := s.Present&abi.PresentThermalStatus != 0 && s.ThermalStatus >= abi.ThermalModerate
	switch {
	case emergency:
		if d.Tier != last || d.Window != EmergencyWindow || d.ReasonCode != abi.ReasonLowMemory {
			t.Errorf("step %d: emergency, got tier %d window %d reason %d", k, d.Tier, d.Window, d.ReasonCode)
		}
	case hot:
		if want := min(s.CurTier+1, last); d.Tier != want {
			t.Errorf("step %d: thermal %v at tier %d, got %d, want %d", k, s.ThermalStatus, s.CurTier, d.Tier, want)
		}
	case s.Present&abi.PresentMemAvailable != 0 && head < PressureMB:
		if want := min(s.CurTier+1, last); d.Tier != want {
			t.Errorf("step %d: headroom %d MB at tier %d, got %d, want %d", k, head, s.CurTier, d.Tier, want)
		}
	}
	if !emergency && d.Window == EmergencyWindow {
		t.Errorf("step %d: emergency window kept after the emergency", k)
	}
}

func cases() []policytest.Case {
	return []policytest.Case{
		{Name: "thermal ramp", Trace: traces + "thermal_ramp.jsonl", Base: engine(), Start: start(), Check: check,
			After: func(t *testing.T, steps []policytest.Step) {
				if got := steps[len(steps)-1].Decision.Tier; got != 0 {
					t.Errorf("after cooling: tier %d, want 0", got)
				}
			}},
		{Name: "memory oscillating", Trace: traces + "memory_oscillating.jsonl", Base: engine(), Start: start(), Check: check,
			After: func(t *testing.T, steps []policytest.Step) {
				down := 0
				for _, st := range steps {
					if st.Decision.Tier > st.Sensors.CurTier {
						down++
					}
				}
				if down == 0 {
					t.Error("never stepped down under memory pressure")
				}
			}},
		{Name: "trim critical emergency window", Trace: traces + "trim_critical.jsonl", Base: engine(), Start: start(), Check: check,
			After: func(t *testing.T, steps []policytest.Step) {
				sawEmergency := false
				for _, st := range steps {
					sawEmergency = sawEmergency || st.Decision.Window == EmergencyWindow
				}
				if !sawEmergency {
					t.Error("the trace's critical trim never opened the emergency window")
				}
			}},
	}
}

func TestNative(t *testing.T) { policytest.RunNative(t, Decide, cases()) }

func TestWasm(t *testing.T) { policytest.RunWasm(t, policytest.Build(t, "."), cases()) }

// asWasm is the AssemblyScript build of tiers.ts (make policies, with npm).
const asWasm = "tiers.as.wasm"

// TestAssemblyScript runs the same table against the AssemblyScript build.
// It is skipped when the module was not built (no npm) unless
// EDGELLM_REQUIRE_AS is set, as `make test` does when npm exists.
func TestAssemblyScript(t *testing.T) {
	if _, err := os.Stat(asWasm); err != nil {
		if os.Getenv("EDGELLM_REQUIRE_AS") != "" {
			t.Fatalf("%s: %v (build it with make policies; needs npm)", asWasm, err)
		}
		t.Skipf("%s not built (make policies builds it when npm exists)", asWasm)
	}
	policytest.RunWasm(t, asWasm, cases())
}
