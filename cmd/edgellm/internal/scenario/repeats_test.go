//go:build linux

package scenario

import "testing"

// TestMedianPhases: over three repeats each phase comes from the repeat
// with the median tok/s there (phases independently), every repeat's
// phases are kept, and the rest of the result is the first repeat's.
func TestMedianPhases(t *testing.T) {
	run := func(outcome string, tps ...float64) PolicyResult {
		r := PolicyResult{Outcome: outcome}
		for i, x := range tps {
			r.CPUPhases = append(r.CPUPhases, CPUPhase{From: 10 * i, To: 10 * (i + 1), TPS: x, ThreadsLast: int(x)})
		}
		return r
	}
	got := medianPhases([]PolicyResult{run("first", 10, 300, 5), run("second", 30, 100, 6), run("third", 20, 200, 4)})
	if got.Outcome != "first" || len(got.CPUPhaseRuns) != 3 || len(got.CPUPhases) != 3 {
		t.Fatalf("%+v", got)
	}
	for i, want := range []float64{20, 200, 5} {
		if ph := got.CPUPhases[i]; ph.TPS != want || ph.ThreadsLast != int(want) || ph.From != 10*i {
			t.Errorf("phase %d: %+v, want the repeat with %.0f tok/s", i, ph, want)
		}
	}
	one := run("only", 1, 2)
	if got := medianPhases([]PolicyResult{one}); got.CPUPhaseRuns != nil || len(got.CPUPhases) != 2 {
		t.Errorf("one repeat: %+v", got)
	}
}
