//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/runstats"
	"github.com/edgellm/edgellm/cmd/edgellm/internal/scenario"
)

// TestScenarioThermalPerLayer: the thermal throttle with three contenders
// on a SYNTHETIC llama3.2-1b-shaped model cut to 4 layers
// (testdata/scenarios/thermal-perlayer.yaml): static-highest (Q8_0),
// default with tiers only (Q8_0 → Q5_0 → Q4_0) and default with the lower
// tiers as per-layer weight sets and a calibrated precision manifest. The
// per-layer controller moves no layer before the throttle's token, only
// for the thermal budget or a latency spike, never below a layer's
// manifest floor; its mean
// bits/weight lie strictly between the tier-only run's and the top
// tier's, and its KL against the top tier is at most the tier-only run's.
func TestScenarioThermalPerLayer(t *testing.T) {
	const file = "../../testdata/scenarios/thermal-perlayer.yaml"
	rep, dir := runRealScenario(t, file)
	st := policyResult(t, rep, "static-highest")
	def := policyResult(t, rep, "default")
	pl := policyResult(t, rep, "default-perlayer")
	for _, p := range []*scenario.PolicyResult{st, def, pl} {
		if !p.Completed || p.Tokens != rep.N {
			t.Errorf("%s: %s after %d tokens", p.Name, p.Outcome, p.Tokens)
		}
		assertQuotaBit(t, p)
		if p.PolicyFailures != 0 {
			t.Errorf("%s: %d policy failures under the CPU quota", p.Name, p.PolicyFailures)
		}
		if p.Engine != "native" {
			t.Errorf("%s ran on engine %q, want native", p.Name, p.Engine)
		}
	}
	throttleAt := *rep.Thermal.Schedule[0].AtToken
	last := len(rep.Tiers) - 1

	// static-highest stays on tier 0; tier-only default goes one tier down
	// per rise of the thermal status (two rises: to the last tier).
	if st.TierSwaps != 0 {
		t.Errorf("static-highest swapped %d times", st.TierSwaps)
	}
	if got := def.Timeline[len(def.Timeline)-1].Tier; def.TierSwaps != 2 || got != last {
		t.Errorf("default (tiers only): %d swaps, ends on tier %d; want 2 swaps, tier %d: %+v", def.TierSwaps, got, last, def.Events)
	}

	// The per-layer run: no tier swap, every change a layer move for the
	// thermal budget or a latency spike (drops a layer to its floor; it
	// happened on the loaded development machine), never for throughput
	// (tok_target 0.5 is below anything the throttle leaves), and none
	// before the throttle: the budget is 8 bits until then and a spike
	// needs SpikeWarmSamples (3) latency samples, taken every 16 steps.
	if pl.TierSwaps != 0 {
		t.Errorf("default-perlayer swapped tiers %d times", pl.TierSwaps)
	}
	moves := 0
	for _, e := range pl.Events {
		if !strings.HasPrefix(e.What, "policy at step ") {
			continue
		}
		moves++
		if !strings.Contains(e.What, "layer bits [") || !(strings.Contains(e.What, "thermal budget") || strings.Contains(e.What, "latency spike")) {
			t.Errorf("default-perlayer: %q, want only layer moves for the thermal budget or a latency spike", e.What)
		}
	}
	sets := readSets(t, filepath.Join(dir, pl.Name, "stats.jsonl"))
	if len(sets) < 2 || sets[0].I != 0 || !allZero(sets[0].LayerSets) {
		t.Fatalf("default-perlayer: sets records %+v, want all layers on set 0 at token 0, then moves", sets)
	}
	if sets[1].I < throttleAt {
		t.Errorf("default-perlayer moved a layer at token %d, before the throttle at %d", sets[1].I, throttleAt)
	}
	if moves != len(sets)-1 {
		t.Errorf("default-perlayer: %d policy moves but %d set changes in stats.jsonl", moves, len(sets)-1)
	}

	// Floors: the calibrated manifest's min_bits per layer, against the
	// nominal bits of the set each layer ends on.
	floors := manifestFloors(t, filepath.Join(dir, "manifest-0.json"))
	final := sets[len(sets)-1].LayerSets
	if len(final) != len(floors) {
		t.Fatalf("%d layers in the sets, %d in the manifest", len(final), len(floors))
	}
	nominal := map[string]int{"Q8_0": 8, "Q5_0": 5, "Q4_0": 4}
	sum := 0
	for l, k := range final {
		b := nominal[rep.Tiers[k].Type]
		sum += b
		if b < floors[l] {
			t.Errorf("layer %d ends on %s (%d bits), below its manifest floor %d", l, rep.Tiers[k].Type, b, floors[l])
		}
	}
	// The SEVERE budget is 5 bits (policies/default/precision.go
	// HotterBudgetBits): the controller stops at it or at the floors.
	atFloors := true
	for l, k := range final {
		atFloors = atFloors && (nominal[rep.Tiers[k].Type] == floors[l] || k == last)
	}
	if float64(sum)/float64(len(final)) > 5 && !atFloors {
		t.Errorf("default-perlayer ends on sets %v (floors %v): over the 5-bit budget with room to go down", final, floors)
	}
	t.Logf("default-perlayer: manifest floors %v, final sets %v (%d moves, the first at token %d)", floors, final, moves, sets[1].I)

	// Bits: strictly between the tier-only run's and the top tier's.
	t.Logf("mean bits/weight: static-highest %.3f, default %.3f, default-perlayer %.3f", st.MeanBitsPerWeight, def.MeanBitsPerWeight, pl.MeanBitsPerWeight)
	if !(def.MeanBitsPerWeight < pl.MeanBitsPerWeight && pl.MeanBitsPerWeight < st.MeanBitsPerWeight) {
		t.Errorf("default-perlayer's mean bits/weight %.3f not strictly between default's %.3f and static-highest's %.3f",
			pl.MeanBitsPerWeight, def.MeanBitsPerWeight, st.MeanBitsPerWeight)
	}

	// KL against the top tier on each run's own tokens.
	assertQuality(t, st, def)
	assertQuality(t, st, pl) // logs static-highest's again
	if def.Quality != nil && pl.Quality != nil && !(pl.Quality.MeanKL <= def.Quality.MeanKL) {
		t.Errorf("default-perlayer mean KL %.5f above tier-only default's %.5f", pl.Quality.MeanKL, def.Quality.MeanKL)
	}

	// Throughput under the throttle, after each run's last change. Not
	// asserted as a gain: under a CPU quota tok/s is the quota over the CPU
	// time per token, and on the development machine Q4_0 cost only ~0.88×
	// Q8_0's CPU per token (docs/BENCHMARKS.md), so the per-layer run's
	// expected gain (~5%) is inside a loaded machine's noise (static-highest
	// alone measured 6.5–8.2 tok/s across runs). Asserted: moving layers
	// does not halve the throughput (a run 2× slower than static-highest,
	// which runs the most expensive weights, fails).
	for _, p := range []*scenario.PolicyResult{def, pl} {
		r := p.MeanTPSThrottledSteady / st.MeanTPSThrottledSteady
		t.Logf("throttled tok/s after the last change: %s %.2f, static-highest %.2f (ratio %.2f); from the throttle on: %.2f vs %.2f",
			p.Name, p.MeanTPSThrottledSteady, st.MeanTPSThrottledSteady, r, p.MeanTPSThrottled, st.MeanTPSThrottled)
		if !(r >= 0.5) {
			t.Errorf("%s: throttled tok/s %.2f÷static-highest's = %.2f, want ≥ 0.5", p.Name, p.MeanTPSThrottledSteady, r)
		}
	}
}

// readSets reads the "sets" records of a run's stats.jsonl.
func readSets(t *testing.T, path string) []runstats.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []runstats.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		ev, err := runstats.Parse(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if ev.Event == runstats.Sets {
			out = append(out, ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// manifestFloors is each layer's min_bits in a precision manifest.
func manifestFloors(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Layers []struct {
			MinBits int `json:"min_bits"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	floors := make([]int, len(m.Layers))
	for i, l := range m.Layers {
		floors[i] = l.MinBits
	}
	return floors
}

func allZero(v []int) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}
