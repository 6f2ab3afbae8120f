package trace

import (
	"reflect"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"
)

func gen(t *testing.T, name string, opts GenOptions) []Record {
	t.Helper()
	recs, err := Generate(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	steps := opts.Steps
	if steps == 0 {
		steps = 100
	}
	if len(recs) != steps {
		t.Fatalf("%s: %d records, want %d", name, len(recs), steps)
	}
	return recs
}

func TestGenerators(t *testing.T) {
	tests := []struct {
		name  string
		opts  GenOptions
		check func(t *testing.T, recs []Record)
	}{
		{"thermal-ramp", GenOptions{}, func(t *testing.T, recs []Record) {
			peakAt, peak := -1, abi.ThermalNone
			for i, r := range recs {
				if r.Values.ThermalStatus > peak {
					peak, peakAt = r.Values.ThermalStatus, i
				}
				if i > 0 && peakAt < i && r.Values.ThermalStatus > recs[i-1].Values.ThermalStatus && peak == abi.ThermalSevere {
					t.Errorf("status rises again at %d after the peak", i)
				}
			}
			first, last := recs[0].Values, recs[len(recs)-1].Values
			if peak != abi.ThermalSevere || first.ThermalStatus != abi.ThermalNone || last.ThermalStatus != abi.ThermalNone {
				t.Errorf("statuses: first %v peak %v last %v, want none → severe → none", first.ThermalStatus, peak, last.ThermalStatus)
			}
			if mid := recs[peakAt].Values.TempC; mid < 50 || first.TempC > 36 {
				t.Errorf("temperature: %v at start, %v at the peak", first.TempC, mid)
			}
		}},
		{"thermal-ramp", GenOptions{Params: map[string]string{"peak_status": "5"}}, func(t *testing.T, recs []Record) {
			seen := map[abi.ThermalStatus]bool{}
			for _, r := range recs {
				seen[r.Values.ThermalStatus] = true
			}
			for st := abi.ThermalNone; st <= abi.ThermalEmergency; st++ {
				if !seen[st] {
					t.Errorf("status %v never reached on the way to emergency", st)
				}
			}
		}},
		{"background-app", GenOptions{Params: map[string]string{"at_ms": "2000", "mb": "2800"}}, func(t *testing.T, recs []Record) {
			before, after := recs[19].Values, recs[99].Values // t = 1900 ms and 9900 ms
			if before.MemAvailableMB < 2950 || before.LowMemory {
				t.Errorf("before the app: %d MiB low %v", before.MemAvailableMB, before.LowMemory)
			}
			if after.MemAvailableMB > 220 || !after.LowMemory || after.PSISomeAvg10 <= before.PSISomeAvg10 {
				t.Errorf("after the app took 2800 MiB: %d MiB low %v psi %v", after.MemAvailableMB, after.LowMemory, after.PSISomeAvg10)
			}
		}},
		{"background-app", GenOptions{Params: map[string]string{"release_ms": "6000"}}, func(t *testing.T, recs []Record) {
			if v := recs[50].Values.MemAvailableMB; v > 1020 { // 3000 - 2000, at 5000 ms
				t.Errorf("held: %d", v)
			}
			if v := recs[99].Values.MemAvailableMB; v < 2980 {
				t.Errorf("released: %d", v)
			}
		}},
		{"battery-drain", GenOptions{Steps: 50}, func(t *testing.T, recs []Record) {
			for i := 1; i < len(recs); i++ {
				if recs[i].Values.BatteryPct > recs[i-1].Values.BatteryPct || recs[i].Values.Charging {
					t.Fatalf("battery rises or charges at %d", i)
				}
			}
			if recs[0].Values.BatteryPct != 100 || recs[49].Values.BatteryPct != 5 {
				t.Errorf("ends: %v → %v", recs[0].Values.BatteryPct, recs[49].Values.BatteryPct)
			}
		}},
		{"charger-plugged", GenOptions{IntervalMs: 1000, Params: map[string]string{"at_ms": "30000"}}, func(t *testing.T, recs []Record) {
			for i, r := range recs {
				if r.Values.Charging != (r.TMs >= 30000) {
					t.Fatalf("charging %v at %d ms", r.Values.Charging, r.TMs)
				}
				if i > 0 && recs[i-1].Values.Charging && r.Values.BatteryPct < recs[i-1].Values.BatteryPct {
					t.Fatalf("battery falls while charging at %d ms", r.TMs)
				}
				if i > 0 && !r.Values.Charging && r.Values.BatteryPct > recs[i-1].Values.BatteryPct {
					t.Fatalf("battery rises unplugged at %d ms", r.TMs)
				}
			}
			if recs[99].Values.BatteryPct <= recs[29].Values.BatteryPct {
				t.Errorf("no charge: %v → %v", recs[29].Values.BatteryPct, recs[99].Values.BatteryPct)
			}
		}},
		{"memory-oscillate", GenOptions{Steps: 200, Params: map[string]string{"threshold_mb": "600", "period_ms": "2000"}}, func(t *testing.T, recs []Record) {
			// 200 × 100 ms = 20 s = 10 periods: at least 2k-1 = 19 crossings, k = 10.
			crossings := 0
			for i := 1; i < len(recs); i++ {
				if recs[i].Values.LowMemory != recs[i-1].Values.LowMemory {
					crossings++
				}
				if recs[i].Values.MemThresholdMB != 600 {
					t.Fatalf("threshold %d", recs[i].Values.MemThresholdMB)
				}
				if recs[i].Values.LowMemory != (recs[i].Values.MemAvailableMB < 600) {
					t.Fatalf("low_memory inconsistent at %d", i)
				}
			}
			if crossings < 19 {
				t.Errorf("%d threshold crossings, want ≥ 19", crossings)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, gen(t, tc.name, tc.opts)) })
	}
}

func TestGenerateDeterministic(t *testing.T) {
	for _, name := range ScenarioNames() {
		a := gen(t, name, GenOptions{Seed: 7})
		b := gen(t, name, GenOptions{Seed: 7})
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs with seed 7 differ", name)
		}
		for i := 1; i < len(a); i++ {
			if a[i].TMs-a[i-1].TMs != 100 {
				t.Fatalf("%s: interval %d", name, a[i].TMs-a[i-1].TMs)
			}
		}
	}
	a := gen(t, "memory-oscillate", GenOptions{Seed: 1})
	b := gen(t, "memory-oscillate", GenOptions{Seed: 2})
	if reflect.DeepEqual(a, b) {
		t.Errorf("seeds 1 and 2 give the same noise")
	}
}

func TestGenerateErrors(t *testing.T) {
	tests := []struct {
		name string
		opts GenOptions
		want string
	}{
		{"nope", GenOptions{}, `unknown scenario "nope" (one of background-app, battery-drain`},
		{"thermal-ramp", GenOptions{Params: map[string]string{"peak": "3"}}, `unknown parameter "peak" (parameters: base_c, peak_c`},
		{"thermal-ramp", GenOptions{Params: map[string]string{"peak_c": "hot"}}, `peak_c="hot" is not a number`},
		{"battery-drain", GenOptions{Steps: 1}, "steps 1 outside"},
		{"battery-drain", GenOptions{IntervalMs: -5}, "interval -5 ms"},
	}
	for _, tc := range tests {
		_, err := Generate(tc.name, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Generate(%s, %+v) = %v, want %q", tc.name, tc.opts, err, tc.want)
		}
	}
}
