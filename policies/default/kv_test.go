package main

import (
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/policy-sdk/policytest"
)

// kvMove is one KV type change: the step and the types.
type kvMove struct {
	step     int
	from, to abi.KVType
}

func kvMoves(steps []policytest.Step) []kvMove {
	var out []kvMove
	for k, st := range steps {
		if a, b := st.Sensors.CurKVType, st.Decision.KVType; a != b {
			out = append(out, kvMove{k, a, b})
		}
	}
	return out
}

func startKV(t abi.KVType) abi.Decision {
	d := start()
	d.KVType = t
	return d
}

// cgroupSteps is n calls with a 2048 MiB cgroup limit and usage(i) MiB.
func cgroupSteps(n int, usage func(i int) int32) []abi.Sensors {
	out := make([]abi.Sensors, n)
	for i := range out {
		out[i] = engine()
		out[i].Present |= abi.PresentCgroupLimit | abi.PresentCgroupUsage
		out[i].CgroupLimitMB, out[i].CgroupUsageMB = 2048, usage(i)
	}
	return out
}

// noReadings is n calls with the engine's facts only.
func noReadings(n int) []abi.Sensors {
	out := make([]abi.Sensors, n)
	for i := range out {
		out[i] = engine()
	}
	return out
}

func wantKVMoves(t *testing.T, steps []policytest.Step, want []kvMove) {
	t.Helper()
	got := kvMoves(steps)
	if len(got) != len(want) {
		t.Fatalf("KV moves %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("KV move %d: %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
	for _, m := range got {
		d := &steps[m.step].Decision
		want := abi.ReasonMemoryPressure
		if kvRank(m.to) > kvRank(m.from) {
			want = abi.ReasonMemoryHeadroom
		}
		if d.ReasonCode != want || !strings.Contains(string(d.Reason()), "kv "+m.from.String()+"→"+m.to.String()) {
			t.Errorf("step %d: reason %d %q, want %d naming kv %s→%s", m.step, d.ReasonCode, d.Reason(), want, m.from, m.to)
		}
	}
}

func kvCases() []policytest.Case {
	f16, q8, q4 := abi.KVF16, abi.KVQ8_0, abi.KVQ4_0
	return []policytest.Case{{
		// 95% of the cgroup limit for records 0–39, 49% from 40: one type
		// down at once, another KVHoldSteps later (Q4_0 is the smallest);
		// back up KVCalmSteps after the pressure ends, then once more a
		// hold later, stopping at the start type.
		Name: "kv: down under cgroup pressure, back up to the start type", Trace: traces + "kv_pressure.jsonl", Base: engine(), Start: startKV(f16),
		After: func(t *testing.T, steps []policytest.Step) {
			wantKVMoves(t, steps, []kvMove{{0, f16, q8}, {KVHoldSteps, q8, q4}, {40 + KVCalmSteps, q4, q8}, {40 + KVCalmSteps + KVHoldSteps, q8, f16}})
		},
	}, {
		// A session created with a Q8_0 cache never asks above it.
		Name: "kv: never above the session's start type", Trace: traces + "kv_pressure.jsonl", Base: engine(), Start: startKV(q8),
		After: func(t *testing.T, steps []policytest.Step) {
			wantKVMoves(t, steps, []kvMove{{0, q8, q4}, {40 + KVCalmSteps, q4, q8}})
		},
	}, {
		// The tier controller's trace: usage crosses 90% at record 22 and
		// drops to 50% at 25; tier and KV step down in the same call, the
		// KV comes back KVCalmSteps after record 25.
		Name: "kv: cgroup usage near limit", Trace: traces + "cgroup_pressure.jsonl", Base: engine(), Start: startKV(f16),
		After: func(t *testing.T, steps []policytest.Step) {
			wantKVMoves(t, steps, []kvMove{{22, f16, q8}, {25 + KVCalmSteps, q8, f16}})
			if r := string(steps[22].Decision.Reason()); !strings.Contains(r, "tier 0→1") {
				t.Errorf("step 22: reason %q, want the tier move and the KV move", r)
			}
		},
	}, {
		// Stepping down freed 400 MiB (93% → 73%); taking it back would
		// put usage at 93% again, above the 90% band: no bounce.
		Name: "kv: no bounce back into the low band",
		Steps: cgroupSteps(120, func(i int) int32 {
			if i == 0 {
				return 1900
			}
			return 1500
		}),
		Base: engine(), Start: startKV(f16),
		After: func(t *testing.T, steps []policytest.Step) {
			wantKVMoves(t, steps, []kvMove{{0, f16, q8}})
		},
	}, {
		// Memory oscillating every 2 records: at most one KV change per
		// KVHoldSteps steps, never above the start type.
		Name: "kv: memory oscillating around threshold", Trace: traces + "memory_oscillating.jsonl", Base: engine(), Start: startKV(f16),
		After: func(t *testing.T, steps []policytest.Step) {
			ms := kvMoves(steps)
			if len(ms) == 0 {
				t.Fatal("no KV move: the trace crosses the low band")
			}
			for i, m := range ms {
				if kvRank(m.to) > kvRank(f16) {
					t.Errorf("step %d: KV %s above the start type f16", m.step, m.to)
				}
				if i > 0 && m.step-ms[i-1].step < KVHoldSteps {
					t.Errorf("KV moves at %d and %d: closer than %d", ms[i-1].step, m.step, KVHoldSteps)
				}
			}
		},
	}, {
		// No memory readings: the KV type stays, even when started below
		// the type it could go back up to.
		Name: "kv: no readings, no change", Steps: noReadings(40), Base: engine(), Start: startKV(q8),
		After: func(t *testing.T, steps []policytest.Step) {
			wantKVMoves(t, steps, nil)
		},
	}}
}

func TestKVNative(t *testing.T) {
	policytest.RunNative(t, Decide, kvCases(), policytest.WithReset(reset))
}

func TestKVWasm(t *testing.T) {
	policytest.RunWasm(t, policytest.Build(t, "."), kvCases())
}

// TestKVRefused: an engine that keeps its KV type (a fixed-type engine such
// as llama.cpp, whose runtime clamps the ask away) is asked once, then not
// again for that type.
func TestKVRefused(t *testing.T) {
	reset()
	defer reset()
	asks := 0
	for i := range 80 {
		s := cgroupSteps(1, func(int) int32 { return 1950 })[0]
		s.Step = uint64(i)
		s.Present |= abi.PresentCurrent
		s.CurKVType, s.CurTier, s.CurWindow = abi.KVF16, 3, 2048 // lowest tier: no tier move
		d := startKV(abi.KVF16)
		d.Tier = 3
		Decide(&s, &d)
		if d.KVType != abi.KVF16 {
			asks++
			if i != 0 {
				t.Errorf("step %d: asked %s again after the engine kept f16", i, d.KVType)
			}
		}
	}
	if asks != 1 {
		t.Fatalf("%d asks, want 1 (at step 0)", asks)
	}
}
