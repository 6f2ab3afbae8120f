package main

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/policy-sdk/policytest"
)

const traces = "../../testdata/traces/"

func base() abi.Sensors { return abi.Sensors{Present: abi.PresentTiers, TiersAvailable: 3} }

func start() abi.Decision {
	d := abi.Decision{Tier: 1, SpecK: 4, Window: 1024, Anchors: 4, Threads: 2, CadenceSteps: 1, KVType: abi.KVQ8_0}
	for i := range 6 {
		d.LayerBits[i] = 6
	}
	return d
}

// unchanged: every trace, the decision stays exactly as pre-filled.
func unchanged() []policytest.Case {
	var cs []policytest.Case
	for _, tr := range []string{"thermal_ramp", "trim_critical", "memory_oscillating", "throughput_under_target"} {
		cs = append(cs, policytest.Case{
			Name: tr, Trace: traces + tr + ".jsonl", Base: base(), Start: start(),
			Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
				if *d != start() {
					t.Fatalf("step %d: decision changed: %+v", k, *d)
				}
			},
		})
	}
	return cs
}

// pinned: built with fixedTier=5, the tier goes to the last of 3 and stays.
func pinned() []policytest.Case {
	return []policytest.Case{{
		Name: "fixed tier clamped to available", Trace: traces + "thermal_ramp.jsonl", Base: base(), Start: start(),
		Check: func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
			want := start()
			want.Tier = 2
			if k == 0 {
				want.SetReason(abi.ReasonFixed, "static: fixed tier")
			}
			if d.Tier != 2 || d.SpecK != want.SpecK || d.Window != want.Window || d.LayerBits != want.LayerBits {
				t.Fatalf("step %d: %+v, want tier 2 and the rest unchanged", k, *d)
			}
			if k == 0 && d.ReasonCode != abi.ReasonFixed {
				t.Fatalf("reason %d", d.ReasonCode)
			}
		},
	}}
}

func TestNative(t *testing.T) {
	t.Run("default", func(t *testing.T) { policytest.RunNative(t, Decide, unchanged()) })
	t.Run("fixedTier=5", func(t *testing.T) {
		defer func(old int32) { tier = old }(tier)
		tier = parseTier("5")
		policytest.RunNative(t, Decide, pinned())
	})
}

func TestWasm(t *testing.T) {
	t.Run("default", func(t *testing.T) { policytest.RunWasm(t, policytest.Build(t, "."), unchanged()) })
	t.Run("fixedTier=5", func(t *testing.T) {
		policytest.RunWasm(t, policytest.Build(t, ".", "-ldflags=-X main.fixedTier=5"), pinned())
	})
}

func TestParseTier(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int32
	}{{"", -1}, {"0", 0}, {"2", 2}, {"12", 12}, {"-1", -1}, {"x", -1}, {"99999", -1}} {
		if got := parseTier(tc.in); got != tc.want {
			t.Errorf("parseTier(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
