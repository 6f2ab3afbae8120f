//go:build linux

package main

import (
	"testing"
	"time"

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

// cpuPhaseWant is one phase of cpu-contention.yaml.
type cpuPhaseWant struct {
	from, to int
	hogs     int // busy hog threads; -1: one per allowed CPU
}

// TestScenarioCPU runs testdata/scenarios/cpu-contention.yaml: static -t 1,
// static -t 2 and default (starting at 2 threads) on a 2-layer SYNTHETIC
// model; no hog for tokens 0-15, one hog thread for 16-31, one per allowed
// CPU for 32-47, none for 48-95. What holds on any machine, quiet or loaded
// (each a fact about token positions and thread counts, not about speed):
//   - the hogs ran: CPU time during their phases only, in every run;
//   - static-t1 and static-t2 kept 1 and 2 threads in every phase;
//   - default decoded at 1 thread by the end of both hog phases: a hog
//     that takes a decode thread's core makes the next 2-thread step
//     several quiet steps long, the host asks the policy at once
//     (host.JumpRatio) and the run queue shows the hog.
//
// What holds only where the rest of the machine leaves the CPUs to this run
// (quietPhase: other processes used at most quietCores of the allowed CPUs
// during the phase, error bound included, in all three runs, or in
// default's and static-t2's for the CPU check), asserted then and logged
// otherwise. (Until session 10 the criterion was the runner's median count
// of other runnable tasks from /proc/loadavg; on this machine's 6.18 kernel
// that count reads 1-2 phantom tasks while the CPUs are idle, so the
// criterion never held and nothing below was asserted.)
//   - in both hog phases default's CPU time per token is at most
//     static-t2's (+ the /proc/PID/stat resolution: 2 ticks per reading,
//     both ends of both phases): the same arithmetic without a partner
//     spinning at ggml's barriers while the other waits for a core
//     (under other load the 2-thread step that shows default the hog can
//     cost more than a luckier static-t2 run's whole phase);
//   - under one hog thread per CPU, default's tok/s ≥ 0.9 × the better
//     static's: default is at 1 thread from the phase's first token (it
//     lowered in the one-hog phase and holds), like static-t1;
//   - under one hog thread, default's tok/s ≥ 0.5 × the better static's:
//     it pays the step(s) at 2 threads that show the hog (a collapsed step
//     costs several quiet ones; 16 tokens are too few to hide them, so the
//     issue's 0.9× is not asserted there);
//   - default raised threads again after the hogs left, if that phase
//     lasted minRaiseWall (room for four policy calls ≥ 50 ms apart).
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
	rep, _, _ := runScenarioCLI(t, "../../testdata/scenarios/cpu-contention.yaml")
	if rep.Simulated {
		t.Fatalf("CPU hogs are real processes, but the report says %s", rep.Pressure)
	}
	want := []cpuPhaseWant{{0, 16, 0}, {16, 32, 1}, {32, 48, -1}, {48, 95, 0}}
	runs := map[string]*scenario.PolicyResult{}
	for _, name := range []string{"static-t1", "static-t2", "default"} {
		p := policyResult(t, rep, name)
		runs[name] = p
		if !p.Completed || p.Tokens != rep.N {
			t.Fatalf("%s: %s after %d of %d tokens", p.Name, p.Outcome, p.Tokens, rep.N)
		}
		if len(p.CPUPhases) != len(want) {
			t.Fatalf("%s: %d CPU phases, want %d: %+v", p.Name, len(p.CPUPhases), len(want), p.CPUPhases)
		}
		for i, w := range want {
			ph := p.CPUPhases[i]
			hogs := w.hogs
			if hogs < 0 {
				hogs = ncpu
			}
			if ph.From != w.from || ph.To != w.to || ph.HogThreads != hogs {
				t.Errorf("%s: phase %d is %d–%d with %d hog threads, want %d–%d with %d", p.Name, i, ph.From, ph.To, ph.HogThreads, w.from, w.to, hogs)
			}
			// A hog thread gets some CPU however loaded the machine is:
			// one tick over the phase would show.
			if (hogs > 0) != (ph.HogCPUMs > 0) {
				t.Errorf("%s: phase %d–%d with %d hog threads: hog CPU %.0f ms", p.Name, ph.From, ph.To, hogs, ph.HogCPUMs)
			}
			if i > 0 && (ph.CPUPerTokenMs <= 0 || ph.TPS <= 0) {
				t.Errorf("%s: phase %d–%d not measured: %+v", p.Name, ph.From, ph.To, ph)
			}
		}
	}
	for name, n := range map[string]int{"static-t1": 1, "static-t2": 2} {
		for _, ph := range runs[name].CPUPhases {
			if ph.ThreadsMin != n || ph.ThreadsMax != n {
				t.Errorf("%s: threads %d–%d in phase %d–%d, want %d throughout", name, ph.ThreadsMin, ph.ThreadsMax, ph.From, ph.To, n)
			}
		}
	}
	s1, s2, def := runs["static-t1"].CPUPhases, runs["static-t2"].CPUPhases, runs["default"].CPUPhases
	for i := range want {
		d, a, b := def[i], s1[i], s2[i]
		best := max(a.TPS, b.TPS)
		quiet := quietPhase(a) && quietPhase(b) && quietPhase(d)
		t.Logf("tokens %d–%d, %d hog threads: default %.1f tok/s (threads %d–%d, last %d, %.2f ms CPU/token), static-t1 %.1f (%.2f ms), static-t2 %.1f (%.2f ms); default ÷ better static %.2f; other load %.2f/%.2f/%.2f cores (±%.2f/%.2f/%.2f), quiet %v",
			d.From, d.To, d.HogThreads, d.TPS, d.ThreadsMin, d.ThreadsMax, d.ThreadsLast, d.CPUPerTokenMs, a.TPS, a.CPUPerTokenMs, b.TPS, b.CPUPerTokenMs,
			d.TPS/best, d.OtherBusy, a.OtherBusy, b.OtherBusy, d.OtherBusyRes, a.OtherBusyRes, b.OtherBusyRes, quiet)
		if d.HogThreads > 0 {
			if d.ThreadsLast != 1 {
				t.Errorf("default: %d threads at the end of phase %d–%d (%d hog threads), want 1", d.ThreadsLast, d.From, d.To, d.HogThreads)
			}
			// Each phase's CPU is the difference of two readings of whole
			// ticks, utime and stime each truncated: off by < 2 ticks.
			// Only where neither run saw other load: default pays the
			// collapsed 2-thread step(s) that show it the hog, and under
			// other load one such step can cost more CPU than the whole
			// phase of a luckier static-t2 run (seen in a full-suite run:
			// 9.4 against 5.0 ms per token with 3-4 other runnable tasks).
			margin := 2 * 2 * 1000 / userHZ() / float64(d.To-d.From)
			if quietPhase(d) && quietPhase(b) && d.CPUPerTokenMs > b.CPUPerTokenMs+margin {
				t.Errorf("phase %d–%d on a machine otherwise free: default used %.3f ms CPU per token, static-t2 %.3f (+%.3f resolution)", d.From, d.To, d.CPUPerTokenMs, b.CPUPerTokenMs, margin)
			}
		}
		if !quiet {
			continue
		}
		switch {
		case d.HogThreads == ncpu && d.TPS < 0.9*best:
			t.Errorf("phase %d–%d on a machine otherwise free: default %.1f tok/s < 0.9 × %.1f", d.From, d.To, d.TPS, best)
		case d.HogThreads > 0 && d.HogThreads < ncpu && d.TPS < 0.5*best:
			t.Errorf("phase %d–%d on a machine otherwise free: default %.1f tok/s < 0.5 × %.1f", d.From, d.To, d.TPS, best)
		}
	}
	// The raise needs ThreadCalmCalls calm policy calls after the hogs
	// left, and the host keeps calls ≥ 50 ms apart: asserted when the
	// phase gave it room for four (its wall time, from its own tok/s).
	da := def[len(def)-1]
	wall := time.Duration(float64(da.To-da.From) / da.TPS * float64(time.Second))
	switch {
	case !quietPhase(da):
		t.Logf("other load after the hogs (%.2f ±%.2f cores): the raise back to 2 threads not asserted (threads at the end: %d)", da.OtherBusy, da.OtherBusyRes, da.ThreadsLast)
	case wall < minRaiseWall:
		t.Logf("the phase after the hogs took %v (< %v: fewer than four policy calls): the raise back to 2 threads not asserted (threads at the end: %d)", wall.Round(time.Millisecond), minRaiseWall, da.ThreadsLast)
	case da.ThreadsMax != 2:
		t.Errorf("default: at most %d threads in the %v after the hogs left a free machine, want 2 again", da.ThreadsMax, wall.Round(time.Millisecond))
	}
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

// minRaiseWall is the phase length that leaves room for four policy calls
// at the host's minimum interval (50 ms).
const minRaiseWall = 200 * time.Millisecond
