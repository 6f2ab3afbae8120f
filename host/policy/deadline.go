package policy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// The per-call deadline: stopTimer for instrumented modules (a stop flag
// the module checks), callCtx for the fallback runtime (a context wazero
// watches), and the expiry with its late-timer grace that both use.

// stopTimer is the per-call deadline of instrumented modules: a watchdog
// that sets the armed instance's stop flag. Nothing is allocated per call,
// and the decode thread neither starts nor stops a timer: arm records the
// call and wakes the watchdog only when it is idle. The watchdog sleeps in
// a blocking system call (ppoll on an eventfd on Linux), not on a runtime
// timer, and looks at the call
// armed when it wakes: one past its expiry is probed and stopped (expiry);
// one younger than its expiry is looked at again at that expiry; none is
// looked for again a deadline later if calls were armed since the last
// look, else the watchdog goes idle until the next arm. So while a policy
// is called every decode step the watchdog wakes once per deadline.
//
// Measured (host TestPolicyOverheadStories260K under perf, loaded 2-core
// VM): a time.Timer Reset and Stop per call woke an idle thread for the
// timer (a futex wake, a cross-CPU interrupt in a VM) at every call, 12-18%
// of the per-step policy path's CPU samples; a goroutine woken once per
// deadline kept the runtime's monitor thread busy (RATIONALE.md).
//
// A stale look (an earlier call's) finds no target or a later expiry and
// stops nothing, so it can never stop a later call or another instance;
// after disarm returns, the flag is never set.
//
// On Linux with cgo the watchdog is a thread outside the Go runtime
// (nativeWatchdog, watchdog_cgo.go) that hands only overdue calls to a
// goroutine (chase); the goroutine below (watch) is the fallback.
type stopTimer struct {
	native  *nativeWatchdog // nil: the Go watchdog (sleeper, watch)
	sleeper watchSleeper
	closed  atomic.Bool

	mu     sync.Mutex
	target api.MutableGlobal // the armed call's stop flag, nil between calls
	exp    expiry
	fired  bool
	idle   bool      // the watchdog sleeps until an arm wakes it
	when   time.Time // when the watchdog looks next (unless idle)
	armed  uint64    // calls armed so far
	seen   uint64    // armed at the watchdog's last look
}

// expiry is the deadline bookkeeping both mechanisms share (stopTimer for
// instrumented modules, callCtx for the fallback runtime), guarded by their
// mutex.
//
// With the CPU clock of the thread that runs the call (threadClock: Linux
// with cgo), the deadline stops a call that is running, not one that waits
// for a CPU. When the wall-clock deadline passes, the timer probes the
// thread's CPU time over a window of d/probeDiv: a call whose thread ran
// at least half of that window (it is executing, past its budget: a
// runaway) is stopped; a call whose thread did not (other processes have
// the CPUs, or a cgroup quota throttled this one) gets another window. A
// call is also stopped once its thread has run a whole deadline of CPU time
// after the wall deadline, or after maxStarved deadlines of wall time.
// Measured before this rule: on a loaded 2-core CI machine, 2 of ~150 calls
// of the default policy (a few µs of CPU each) were stopped at 5 ms of wall
// time (host TestPolicyOverheadStories260K).
//
// Without a thread clock, a timer that runs more than a whole deadline late
// means the process itself was not running: the guest most likely did not
// run either, so the call gets another deadline, at most maxGraces times.
// Measured: under a 0.12-CPU quota a 2 µs call was stopped after 88 ms of
// wall time, one throttled period (edgellm scenario run
// testdata/scenarios/thermal-throttle.yaml).
type expiry struct {
	d      time.Duration
	begin  time.Time
	at     time.Time
	thread threadClock

	probing  bool          // the wall deadline passed; probing the thread
	probeAt  time.Time     // the last probe
	probeCPU time.Duration // the thread's CPU time at the last probe
	ranAfter time.Duration // CPU time the thread ran since the first probe

	graces  int    // late-timer extensions granted to the armed call
	granted uint64 // calls kept past their wall deadline, in total (Stats.DeadlineGraces)
}

// maxGraces bounds the late-timer extensions of one call without a thread
// clock: a runaway guest in a process that is throttled all the time still
// stops, after at most 1+maxGraces deadlines of wall time that the timer
// could see.
const maxGraces = 3

// maxStarved bounds the wall time of a call with a thread clock, in
// deadlines (500 ms at the default 5 ms).
const maxStarved = 100

// probeDiv sets the probe window, d/probeDiv (1.25 ms at the default 5 ms):
// a runaway on an idle CPU is stopped about d + d/probeDiv after it began.
const probeDiv = 4

// minProbe is the shortest probe window.
const minProbe = 100 * time.Microsecond

// start begins a call's deadline on the thread whose clock is tc.
func (e *expiry) start(now time.Time, tc threadClock) {
	e.begin, e.at, e.graces, e.thread = now, now.Add(e.d), 0, tc
	e.probing, e.ranAfter = false, 0
}

// finish ends the call: one that was kept running past its wall deadline
// and returned is counted.
func (e *expiry) finish(fired bool) {
	if e.probing && !fired {
		e.granted++
	}
}

// check decides at timer time now: due means stop the call; a positive
// wait means the call goes on and the timer must be reset for wait.
// Neither: a stale timer (an earlier call's) fired before this expiry.
func (e *expiry) check(now time.Time) (due bool, wait time.Duration) {
	if now.Before(e.at) {
		return false, 0
	}
	if cpu, ok := e.thread.read(); ok {
		if e.probing {
			ran := cpu - e.probeCPU
			e.ranAfter += ran
			if 2*ran >= now.Sub(e.probeAt) || e.ranAfter >= e.d || now.Sub(e.begin) >= maxStarved*e.d {
				return true, 0
			}
		}
		e.probing, e.probeAt, e.probeCPU = true, now, cpu
		wait = max(e.d/probeDiv, minProbe)
		e.at = now.Add(wait)
		return false, wait
	}
	if now.Sub(e.at) > e.d && e.graces < maxGraces {
		e.graces++
		e.granted++
		e.at = now.Add(e.d)
		return false, e.d
	}
	return true, 0
}

func (s *stopTimer) init(d time.Duration) {
	s.exp.d = d
	s.idle = true
	if d <= 0 {
		return
	}
	if s.native = newNativeWatchdog(s); s.native == nil {
		s.sleeper = newWatchSleeper()
		go s.watch()
	}
}

func (s *stopTimer) close() {
	if s.closed.Swap(true) {
		return
	}
	if s.native != nil {
		s.native.close()
	} else if s.sleeper != nil {
		s.sleeper.wake() // the watchdog sees closed and closes the sleeper
	}
}

// chase follows a call the native watchdog found past its deadline, by the
// expiry rules (probes, graces), until it is stopped or no call is armed.
func (s *stopTimer) chase() {
	for {
		s.mu.Lock()
		if s.target == nil {
			s.mu.Unlock()
			return
		}
		now := time.Now()
		due, wait := s.exp.check(now)
		if due {
			s.target.Set(1)
			s.fired, s.target = true, nil
			s.mu.Unlock()
			return
		}
		if wait == 0 {
			wait = s.exp.at.Sub(now) // a later call, younger than its deadline
		}
		s.mu.Unlock()
		time.Sleep(wait)
	}
}

// watch is the watchdog goroutine.
func (s *stopTimer) watch() {
	for !s.closed.Load() {
		s.sleeper.sleep(s.fire())
	}
	s.sleeper.close()
}

// arm starts the deadline of one call on the instance whose flag is g, run
// on the thread whose clock is tc. It wakes the watchdog when it is idle or
// would look after this call's expiry (the deadline was shortened).
func (s *stopTimer) arm(g api.MutableGlobal, tc threadClock) {
	now := time.Now()
	s.mu.Lock()
	s.target, s.fired = g, false
	s.exp.start(now, tc)
	s.armed++
	d := s.exp.d
	wake := s.idle || s.exp.at.Before(s.when)
	if wake {
		s.idle, s.when = false, s.exp.at
	}
	s.mu.Unlock()
	switch {
	case s.native != nil:
		s.native.arm(d)
	case wake && s.sleeper != nil:
		s.sleeper.wake()
	}
}

// disarm ends the call and reports whether the deadline fired during it
// (the flag is then set: the instance must be discarded).
func (s *stopTimer) disarm() (fired bool) {
	if s.native != nil {
		s.native.disarm()
	}
	s.mu.Lock()
	s.target = nil
	fired = s.fired
	s.exp.finish(fired)
	s.mu.Unlock()
	return fired
}

// fire is the watchdog's look at the armed call: it stops one past its
// deadline and returns how long to sleep before the next look (negative:
// until an arm wakes it).
func (s *stopTimer) fire() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	next := func(wait time.Duration) time.Duration {
		s.idle, s.when = false, now.Add(wait)
		return wait
	}
	if s.target == nil {
		if s.armed != s.seen { // calls go on: look again a deadline later
			s.seen = s.armed
			return next(s.exp.d)
		}
		s.idle = true
		return -1
	}
	s.seen = s.armed
	due, wait := s.exp.check(now)
	if due {
		s.target.Set(1)
		s.fired, s.target = true, nil
		return next(s.exp.d)
	}
	if wait == 0 {
		wait = s.exp.at.Sub(now) // a call younger than its deadline: look at its expiry
	}
	return next(wait)
}

// grantedTotal is the number of extensions granted so far.
func (s *stopTimer) grantedTotal() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exp.granted
}

// callCtx is the per-call deadline as a reusable context.Context: arming it
// resets one timer instead of allocating a context, a timer and a cancel
// function per call. wazero (WithCloseOnContextDone) watches Done and closes
// the module when it fires.
type callCtx struct {
	timer *time.Timer

	mu    sync.Mutex
	done  chan struct{}
	armed bool
	fired bool
	exp   expiry
}

func (c *callCtx) init(d time.Duration) {
	c.exp.d = d
	c.done = make(chan struct{})
	if d > 0 {
		c.timer = time.AfterFunc(time.Hour, c.fire)
		c.timer.Stop()
	}
}

func (c *callCtx) close() {
	if c.timer != nil {
		c.timer.Stop()
	}
}

// arm starts the deadline for one call, run on the thread whose clock is
// tc.
func (c *callCtx) arm(tc threadClock) context.Context {
	now := time.Now()
	c.mu.Lock()
	c.armed = true
	c.exp.start(now, tc)
	c.mu.Unlock()
	c.timer.Reset(c.exp.d)
	return c
}

// disarm ends the call and reports whether the deadline fired during it.
// A fired context gets a fresh Done channel (the failure path allocates).
func (c *callCtx) disarm() (fired bool) {
	c.timer.Stop()
	c.mu.Lock()
	c.armed = false
	fired = c.fired
	c.exp.finish(fired)
	if fired {
		c.fired, c.done = false, make(chan struct{})
	}
	c.mu.Unlock()
	return fired
}

// fire runs on the timer goroutine. A stale timer (an earlier call's) is
// ignored by checking the expiry of the armed call.
func (c *callCtx) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed || c.fired {
		return
	}
	due, wait := c.exp.check(time.Now())
	if wait > 0 {
		c.timer.Reset(wait)
	}
	if due {
		c.fired = true
		close(c.done)
	}
}

// grantedTotal is the number of extensions granted so far.
func (c *callCtx) grantedTotal() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exp.granted
}

func (c *callCtx) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exp.at, c.armed
}

func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fired {
		return context.DeadlineExceeded
	}
	return nil
}

// Value carries no values: guests see no caller context values.
func (c *callCtx) Value(any) any { return nil }
