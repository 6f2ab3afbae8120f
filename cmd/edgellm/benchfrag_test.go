package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestBenchActivationsFrag (issue #29.1): bench --activations --frag on
// stories260K decodes 256 positions with the window changed every 32 and
// reports every graph of the run: each schedule phase has its graphs, a
// per-layer phase reads several rings, a uniform one reads one, every
// graph's allocator bytes are its own plan (at least its peak live bytes
// with flash attention, where ggml reuses no input in place, and within
// the session's buffer), and max and mean are over the rows.
func TestBenchActivationsFrag(t *testing.T) {
	m := sharedtest.Stories260K(t)
	out, errs, code := runCLI(t, "bench", "-m", m, "--activations", "--frag", "-p", "32", "-n", "224", "-t", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep fragReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	sched := fragSchedule(256, 5)
	phases := map[string]int{}
	lo, hi, sum := 1e9, 0.0, 0.0
	var maxPeak, maxBuf int64
	next := 0
	for _, g := range rep.Graphs {
		phases[g.Phase]++
		if g.From != next || g.To <= g.From {
			t.Errorf("graph %+v: want it to start at %d", g, next)
		}
		next = g.To
		r := float64(g.Allocated) / float64(g.PeakLive)
		if g.PeakLive <= 0 || g.AllocOverPeak != r || r < 1 || g.Allocated > g.Buffer {
			t.Errorf("graph %+v: allocated ÷ peak live %.3f", g, r)
		}
		lo, hi, sum = min(lo, r), max(hi, r), sum+r
		maxPeak, maxBuf = max(maxPeak, g.PeakLive), max(maxBuf, g.Buffer)
		switch {
		case strings.HasPrefix(g.Phase, "per-layer") && len(g.Rings) < 2,
			strings.HasPrefix(g.Phase, "uniform") && len(g.Rings) != 1:
			t.Errorf("graph %+v: rings %v", g, g.Rings)
		}
	}
	if next != 256 || len(phases) != len(sched) {
		t.Errorf("%d positions, phases %v; want 256 and the %d of %v", next, phases, len(sched), rep.Schedule)
	}
	if n := float64(len(rep.Graphs)); rep.AllocOverPeakMax != hi || rep.AllocOverPeakMean < sum/n*(1-1e-12) || rep.AllocOverPeakMean > sum/n*(1+1e-12) || lo > rep.AllocOverPeakMean {
		t.Errorf("max %.4f mean %.4f; rows give max %.4f mean %.4f", rep.AllocOverPeakMax, rep.AllocOverPeakMean, hi, sum/n)
	}
	if want := float64(maxBuf) / float64(maxPeak); rep.BufferOverMaxPeak != want || want < 1 {
		t.Errorf("largest buffer ÷ largest peak live %.4f, want %.4f (≥ 1: the buffer holds the largest graph)", rep.BufferOverMaxPeak, want)
	}
	if _, errs, code := runCLI(t, "bench", "-m", m, "--frag"); code != 2 || !strings.Contains(errs, "--frag is for --activations") {
		t.Errorf("--frag alone: exit %d, %q", code, errs)
	}
}
