//go:build linux

package main

import (
	"math"
	"slices"
	"testing"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/scenario"
	"golang.org/x/sys/unix"
)

// userHZ is the unit of /proc/PID/stat CPU times the runner's CPU per
// token is read in (AT_CLKTCK; 100 without one).
func userHZ() float64 {
	const atClkTck = 17
	if auxv, err := unix.Auxv(); err == nil {
		for _, kv := range auxv {
			if kv[0] == atClkTck && kv[1] > 0 {
				return float64(kv[1])
			}
		}
	}
	return 100
}

// cpuPhaseWant is one phase of cpu-contention-long.yaml.
type cpuPhaseWant struct {
	from, to int
	hogs     int // busy hog threads; -1: one per allowed CPU
}

// TestScenarioCPU runs testdata/scenarios/cpu-contention-long.yaml: static
// -t 1, static -t 2 and default (starting at 2 threads) on a 4-layer
// SYNTHETIC model, each three times in alternating order; no hog for tokens
// 0-63, one hog thread for 64-127, one per allowed CPU for 128-191, none for
// 192-319. Each phase lasts 0.5-1.5 s on a quiet 2-core machine: long
// enough for the policy's 200 ms CPU readings and for other processes' CPU
// during the phase to be resolved (/proc/stat ticks). `make test` runs this
// test on its own after the rest of the suite, so that on a machine given
// to CI its phases are quiet and the speed assertions below run.
//
// What holds on any machine, quiet or loaded (facts about token positions
// and thread counts, in every repeat):
//   - every contender decoded every token;
//   - the hogs ran: CPU time during their phases only;
//   - static-t1 and static-t2 kept 1 and 2 threads in every phase.
//
// What holds where the rest of the machine left the CPUs to this run
// (quietPhase in all three contenders' reported repeat of the phase),
// asserted then and logged otherwise, in every phase (the first one's
// other load is read from when the runner first sees the engine, loading):
//   - issue #13's goal: default's tok/s ≥ 0.9 × the better static's, less
//     the run-to-run noise of the phase: the largest relative spread
//     (max − min) / max of any contender's three repeats there (the
//     reported repeat is the median; a shortfall within that spread is not
//     a measured one);
//   - under one hog thread, default ends the phase with no more threads
//     than free CPUs (1 on 2 CPUs) and, on 2 CPUs, uses at most static-t2's
//     CPU per token (+ /proc tick resolution);
//   - after the hogs, default ends with more than one thread again.
//
// The tok/s ratios of every phase are logged.
func TestScenarioCPU(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	ncpu := set.Count()
	if ncpu < 2 {
		t.Skipf("%d allowed CPU: the scenario compares 1 and 2 decode threads", ncpu)
	}
	rep, _, _ := runScenarioCLI(t, "../../testdata/scenarios/cpu-contention-long.yaml")
	if rep.Simulated {
		t.Fatalf("CPU hogs are real processes, but the report says %s", rep.Pressure)
	}
	want := []cpuPhaseWant{{0, 64, 0}, {64, 128, 1}, {128, 192, -1}, {192, 319, 0}}
	runs := map[string]*scenario.PolicyResult{}
	for _, name := range []string{"static-t1", "static-t2", "default"} {
		p := policyResult(t, rep, name)
		runs[name] = p
		if !p.Completed || p.Tokens != rep.N {
			t.Fatalf("%s: %s after %d of %d tokens", p.Name, p.Outcome, p.Tokens, rep.N)
		}
		if len(p.CPUPhaseRuns) != 3 {
			t.Fatalf("%s: %d repeats, want 3", p.Name, len(p.CPUPhaseRuns))
		}
		for r, phases := range append(slices.Clip(p.CPUPhaseRuns), p.CPUPhases) {
			if len(phases) != len(want) {
				t.Fatalf("%s repeat %d: %d CPU phases, want %d: %+v", p.Name, r, len(phases), len(want), phases)
			}
			for i, w := range want {
				ph := phases[i]
				hogs := w.hogs
				if hogs < 0 {
					hogs = ncpu
				}
				if ph.From != w.from || ph.To != w.to || ph.HogThreads != hogs {
					t.Errorf("%s repeat %d: phase %d is %d–%d with %d hog threads, want %d–%d with %d", p.Name, r, i, ph.From, ph.To, ph.HogThreads, w.from, w.to, hogs)
				}
				// A hog thread gets some CPU however loaded the machine is:
				// one tick over the phase would show.
				if (hogs > 0) != (ph.HogCPUMs > 0) {
					t.Errorf("%s repeat %d: phase %d–%d with %d hog threads: hog CPU %.0f ms", p.Name, r, ph.From, ph.To, hogs, ph.HogCPUMs)
				}
				if i > 0 && (ph.CPUPerTokenMs <= 0 || ph.TPS <= 0) {
					t.Errorf("%s repeat %d: phase %d–%d not measured: %+v", p.Name, r, ph.From, ph.To, ph)
				}
				if n := map[string]int{"static-t1": 1, "static-t2": 2}[name]; n > 0 && (ph.ThreadsMin != n || ph.ThreadsMax != n) {
					t.Errorf("%s repeat %d: threads %d–%d in phase %d–%d, want %d throughout", name, r, ph.ThreadsMin, ph.ThreadsMax, ph.From, ph.To, n)
				}
			}
		}
	}
	s1, s2, def := runs["static-t1"].CPUPhases, runs["static-t2"].CPUPhases, runs["default"].CPUPhases
	asserted := 0
	for i := range want {
		d, a, b := def[i], s1[i], s2[i]
		best := max(a.TPS, b.TPS)
		quiet := quietPhase(a) && quietPhase(b) && quietPhase(d)
		noise := 0.0
		for _, p := range runs {
			lo, hi := math.Inf(1), 0.0
			for _, r := range p.CPUPhaseRuns {
				lo, hi = min(lo, r[i].TPS), max(hi, r[i].TPS)
			}
			if hi > 0 {
				noise = max(noise, (hi-lo)/hi)
			}
		}
		t.Logf("tokens %d–%d, %d hog threads: default %.1f tok/s (threads %d–%d, last %d, %.2f ms CPU/token), static-t1 %.1f (%.2f ms), static-t2 %.1f (%.2f ms); default ÷ better static %.3f; repeat spread %.3f; other load %.2f/%.2f/%.2f cores (±%.2f/%.2f/%.2f), quiet %v",
			d.From, d.To, d.HogThreads, d.TPS, d.ThreadsMin, d.ThreadsMax, d.ThreadsLast, d.CPUPerTokenMs, a.TPS, a.CPUPerTokenMs, b.TPS, b.CPUPerTokenMs,
			d.TPS/best, noise, d.OtherBusy, a.OtherBusy, b.OtherBusy, d.OtherBusyRes, a.OtherBusyRes, b.OtherBusyRes, quiet)
		if !quiet {
			continue
		}
		asserted++
		if d.TPS < 0.9*(1-noise)*best {
			t.Errorf("phase %d–%d on a machine otherwise free: default %.1f tok/s < 0.9 × (1 − %.3f spread) × %.1f, the better static's", d.From, d.To, d.TPS, noise, best)
		}
		switch {
		case d.HogThreads > 0 && d.HogThreads < ncpu:
			if d.ThreadsLast > ncpu-d.HogThreads {
				t.Errorf("default: %d threads at the end of phase %d–%d (%d hog threads on %d CPUs), want at most %d", d.ThreadsLast, d.From, d.To, d.HogThreads, ncpu, ncpu-d.HogThreads)
			}
			// Each phase's CPU is the difference of two readings of whole
			// ticks, utime and stime each truncated: off by < 2 ticks.
			margin := 2 * 2 * 1000 / userHZ() / float64(d.To-d.From)
			if ncpu == 2 && d.CPUPerTokenMs > b.CPUPerTokenMs+margin {
				t.Errorf("phase %d–%d: default used %.3f ms CPU per token, static-t2 %.3f (+%.3f resolution)", d.From, d.To, d.CPUPerTokenMs, b.CPUPerTokenMs, margin)
			}
		case d.HogThreads == 0 && i == len(want)-1 && d.ThreadsLast < 2:
			t.Errorf("default: %d thread at the end of the phase after the hogs left a free machine, want more again", d.ThreadsLast)
		}
	}
	t.Logf("%d of %d phases quiet enough to assert the speed goal", asserted, len(want))
}

// quietCores is the most CPU other processes may have used during a phase,
// in cores, for it to count as quiet: the bound includes the reading's
// error (ph.OtherBusyRes), so a phase too short to resolve it is not quiet.
const quietCores = 0.15

// quietPhase reports whether other processes left the CPUs to this run
// during ph.
func quietPhase(ph scenario.CPUPhase) bool {
	return ph.OtherBusy >= 0 && ph.OtherBusyRes > 0 && ph.OtherBusy+ph.OtherBusyRes <= quietCores
}
