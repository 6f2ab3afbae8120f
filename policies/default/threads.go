package main

import "github.com/edgellm/edgellm/abi"

// CPU contention controller: decode threads follow the CPUs that are
// actually free. On a shared CPU a decode thread that has to wait for a core
// stalls every other decode thread at ggml's per-op barrier (they spin until
// it arrives), so one more runnable process than there are free cores can
// make two threads several times slower than one. The controller
//
//   - lowers the thread count when other runnable tasks leave fewer free
//     CPUs than decode threads, confirmed by CPU pressure (PSI some avg10,
//     unless it is falling: a 10 s average decays for seconds after the
//     contention has gone, and then confirmed any task that happened to be
//     runnable at a call, so the policy lowered again right after raising)
//     or by the engine's own step time against its quiet baseline at this
//     thread count; or, without load readings, when that step time has
//     doubled;
//   - raises it one step when the run queue leaves a CPU free for one more
//     thread on ThreadCalmCalls consecutive calls (PSI is not waited for:
//     its 10 s average lags the run queue by seconds);
//   - changes it at most once per ThreadHoldSteps decode steps;
//   - backs off after a raise that did not pay: when it lowers again within
//     RaiseTrialSteps of a raise and the smoothed tok/s is no higher than
//     before the raise (a small model that two threads only slow down, on a
//     quiet machine), the next raise waits RaiseBackoffMin steps, doubling
//     up to RaiseBackoffMax; a raise that holds for RaiseTrialSteps clears
//     the backoff.
//
// Other load, from a 1.5 host, is cpu_other_busy: the cores' worth of CPU
// time other processes used on this process's CPUs over the last span
// (≥ 200 ms), integrated, so a task that runs now and then counts by what it
// uses. Free CPUs are cpu_allowed minus that; a lower wants more than
// BusyMargin of a core missing for the current threads, a raise a whole
// core free for one more less BusyMargin; CPU PSI some over the same span
// (cpu_psi_some_recent ≥ PSIRecentContended) confirms instead of avg10.
// From a 1.3/1.4 host, other load is the machine's run queue (cpu_runnable)
// minus the policy's own calling thread (the decode threads sleep between
// steps), taken at once when it rises and smoothed over calls when it falls.
// That count is one instant, and on kernels with EEVDF's delayed dequeue
// (6.12+) it includes tasks about to sleep: an idle 2-core machine read 1-2
// other runnable tasks most of the time, so with a noisy step time the
// policy lowered threads on a quiet machine. While it can choose among
// several CPUs the policy asks to be called every ThreadCadence steps.
const (
	// ThreadHoldSteps is the minimum number of decode steps between two
	// thread changes.
	ThreadHoldSteps = 32
	// ThreadCalmCalls is how many consecutive calm readings a raise needs.
	ThreadCalmCalls = 2
	// PSIContended is the CPU PSI some avg10 (%) that confirms contention.
	PSIContended = 10
	// SlowRatio is the step time ÷ quiet baseline that confirms contention;
	// CollapseRatio alone (no load readings) lowers the thread count.
	SlowRatio     = 1.3
	CollapseRatio = 2.0
	// othersAlpha smooths the run-queue reading across calls as it falls.
	othersAlpha = 0.5
	// BusyMargin is the share of a core (cpu_other_busy) that a lower must
	// exceed and a raise may leave in use: /proc/stat's resolution over a
	// 200 ms span is ±0.05 cores per CPU, and a quiet 2-core machine read
	// ≤ 0.12 cores of other load.
	BusyMargin = 0.25
	// PSIRecentContended is the CPU PSI some over the last span (%) that
	// confirms contention: a quiet 2-core machine decoding at 2 threads
	// read 5-14%, one busy process beside them 44-48%, one per CPU 92-99%.
	PSIRecentContended = 20
	// PSISaturated is the CPU PSI some over the span (%) that, with other
	// load on every CPU, says each CPU has another busy task: then a decode
	// thread per CPU takes its fair share of each, and since the barrier
	// wait is bounded (session 9) a partner waiting for its core sleeps
	// instead of spinning. Two threads beside one busy process per CPU
	// decoded 40.3 tok/s against one thread's 32.5 (cpu-contention-long).
	// At two threads beside one busy process per CPU, PSI read 92-99% with
	// the 1B model and 53-74% in that scenario; beside one busy process
	// (which two threads should leave) 44-48%. The scenario's 53-74% is
	// why about one repeat in three still lowers (BENCHMARKS.md).
	PSISaturated = 80
	// PSISaturatedExit is where a saturated reading at one thread per CPU
	// ends: between the two cases' readings, so that one span that dips
	// below PSISaturated does not lower the threads (seen: a lower 32 steps
	// after every raise under one hog per CPU).
	PSISaturatedExit = 60
	// ThreadCadence is the longest call cadence (steps) the policy accepts
	// while it can choose among several CPUs: a hog that arrives or leaves
	// is seen within a few steps. The host's default is every step, which
	// it leaves alone; a longer cadence in force is shortened to this.
	ThreadCadence = 4
	// RaiseTrialSteps is how long after a raise a lower counts against it.
	RaiseTrialSteps = 4 * ThreadHoldSteps
	// RaiseBackoffMin and RaiseBackoffMax bound the wait after a raise that
	// did not pay.
	RaiseBackoffMin = 4 * ThreadHoldSteps
	RaiseBackoffMax = 64 * ThreadHoldSteps
)

// ReasonCPUContention is this policy's reason code for thread changes (the
// ABI has no predefined code for CPU contention).
const ReasonCPUContention = abi.ReasonPolicy + 1

// threadState is what the controller remembers between calls.
type threadState struct {
	others     float32 // smoothed other runnable tasks
	seen       bool    // others holds a reading
	calm       int     // consecutive calm readings
	lastChange uint64  // step of the last thread change
	changed    bool

	psiLast    float32 // the last CPU PSI avg10 read
	psiSeen    bool    // psiLast holds a reading
	psiFalling bool    // the last change of it was down, or none seen yet

	satCalls    int     // consecutive calls that saw every CPU taken
	saturated   bool    // the last call saw every CPU taken
	raised      bool    // a raise is on trial (RaiseTrialSteps)
	raisedAt    uint64  // its step
	raisedTPS   float32 // smoothed tok/s before it (0: not read)
	backoff     uint64  // the current wait after a raise that did not pay
	raiseBefore uint64  // no raise before this step
}

var ts threadState

func threads(s *abi.Sensors, d *abi.Decision, r *reason) {
	if !s.Has(abi.PresentCurrent) || s.CurThreads < 1 {
		return // the host does not report the thread count (ABI < 1.3)
	}
	cur := s.CurThreads
	load := s.Has(abi.PresentCPULoad) && s.CPUAllowed > 0
	busy := load && s.Has(abi.PresentCPUBusy)
	switch {
	case busy:
		ts.others, ts.seen = max(0, s.CPUOtherBusy), true
	case load:
		// A new task counts at once (the lower rule still wants it
		// confirmed); a task gone fades over calls.
		o := max(0, s.CPURunnable-1)
		if !ts.seen || o > ts.others {
			ts.others, ts.seen = o, true
		} else {
			ts.others += othersAlpha * (o - ts.others)
		}
	}
	if load && s.CPUAllowed > 1 && (d.CadenceSteps <= 0 || d.CadenceSteps > ThreadCadence) {
		d.CadenceSteps = ThreadCadence
	}
	psi := s.Has(abi.PresentCPUPSI)
	ratio := s.Has(abi.PresentStepBaseline)
	slow := ratio && s.StepTimeRatio >= SlowRatio
	if psi {
		// The kernel updates avg10 every 2 s; between updates the value
		// repeats. Until it has moved once, its direction is unknown and it
		// confirms nothing (the previous run's contention may be decaying).
		v := s.CPUPSISomeAvg10
		switch {
		case !ts.psiSeen:
			ts.psiFalling = true
		case v != ts.psiLast:
			ts.psiFalling = v < ts.psiLast
		}
		ts.psiLast, ts.psiSeen = v, true
	}
	pressed := psi && s.CPUPSISomeAvg10 >= PSIContended && !ts.psiFalling
	if busy && s.CPUPSISomeRecent >= 0 {
		psi, pressed = true, s.CPUPSISomeRecent >= PSIRecentContended
	}
	// margin: how far free CPUs must fall short of the threads to lower,
	// and how close to a whole free core a raise may be.
	margin := float32(0.5)
	if busy {
		margin = BusyMargin
	}
	if ts.raised && s.Step-ts.raisedAt > RaiseTrialSteps {
		ts.raised, ts.backoff = false, 0 // the raise held
	}
	free := float32(0)
	if load {
		free = float32(s.CPUAllowed) - ts.others
	}
	// Every CPU taken (1.5 readings, measured on 2 CPUs): at one thread per
	// CPU, PSI over the span near 100% with other load of at least all CPUs
	// but one (less the margin); below that, other load past all the CPUs
	// this policy's threads do not use. Then threads = cpu_allowed: each
	// takes its fair share of one CPU. Not put on trial: the raise that
	// follows a hog leaving is judged on its own.
	saturated := false
	if busy && s.CPUPSISomeRecent >= 0 && s.CPUAllowed > 1 {
		n := float32(s.CPUAllowed)
		psiSat := float32(PSISaturated)
		if ts.saturated {
			psiSat = PSISaturatedExit
		}
		saturated = cur >= s.CPUAllowed && s.CPUPSISomeRecent >= psiSat && ts.others >= (n-1)*(1-margin) ||
			cur < s.CPUAllowed && ts.others >= n-float32(cur)+margin
	}
	ts.saturated = saturated
	if !saturated {
		ts.satCalls = 0
	}
	if ts.changed && s.Step-ts.lastChange < ThreadHoldSteps {
		return
	}
	switch {
	case saturated && cur >= s.CPUAllowed:
		ts.calm = 0
		return // keep one thread per CPU
	case saturated:
		ts.calm = 0
		if ts.satCalls++; ts.satCalls >= ThreadCalmCalls {
			ts.satCalls = 0
			ts.raised = false
			setThreads(s, d, r, cur, s.CPUAllowed, "cpu saturated: threads ")
		}
		return
	}
	// Lower.
	if cur > 1 {
		target := int32(0)
		switch {
		case load && free < float32(cur)-margin && (slow || pressed || (!psi && !ratio)):
			target = max(1, min(cur-1, int32(free+margin)))
		case ratio && s.StepTimeRatio >= CollapseRatio:
			target = cur - 1
		}
		if target > 0 {
			ts.calm = 0
			raiseFailed(s)
			setThreads(s, d, r, cur, target, "cpu contended: threads ")
			return
		}
	}
	// Raise.
	if !load || cur >= s.CPUAllowed {
		ts.calm = 0
		return
	}
	if free < float32(cur)+1-margin || s.Step < ts.raiseBefore {
		ts.calm = 0
		return
	}
	ts.calm++
	if ts.calm >= ThreadCalmCalls {
		ts.calm = 0
		ts.raised, ts.raisedAt, ts.raisedTPS = true, s.Step, 0
		if s.Has(abi.PresentTokPerSecSmoothed) {
			ts.raisedTPS = s.TokPerSecSmoothed
		}
		setThreads(s, d, r, cur, cur+1, "cpu free: threads ")
	}
}

// raiseFailed is called before a lower: a raise on trial whose smoothed
// tok/s did not beat the rate before it did not pay, and the next raise
// backs off. Without tok/s readings nothing is judged.
func raiseFailed(s *abi.Sensors) {
	if !ts.raised {
		return
	}
	ts.raised = false
	if ts.raisedTPS <= 0 || !s.Has(abi.PresentTokPerSecSmoothed) || s.TokPerSecSmoothed > ts.raisedTPS {
		return
	}
	ts.backoff = min(max(2*ts.backoff, RaiseBackoffMin), RaiseBackoffMax)
	ts.raiseBefore = s.Step + ts.backoff
}

func setThreads(s *abi.Sensors, d *abi.Decision, r *reason, from, to int32, why string) {
	d.Threads = to
	ts.lastChange, ts.changed = s.Step, true
	r.set(ReasonCPUContention, why)
	r.tierMove(from, to)
}
