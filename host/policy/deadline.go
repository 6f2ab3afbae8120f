package policy

import (
	"context"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// The per-call deadline: stopTimer for instrumented modules (a stop flag
// the module checks), callCtx for the fallback runtime (a context wazero
// watches), and the expiry with its late-timer grace that both use.

// stopTimer is the per-call deadline of instrumented modules: one timer,
// re-armed with Reset, whose callback sets the armed instance's stop flag.
// Nothing is allocated per call. A stale callback (an earlier call's timer
// that fired while that call was returning) finds no target or a later
// expiry and does nothing, so it can never stop a later call or another
// instance; after disarm returns, the flag is never set.
type stopTimer struct {
	timer *time.Timer

	mu     sync.Mutex
	target api.MutableGlobal // the armed call's stop flag, nil between calls
	exp    expiry
	fired  bool
}

// expiry is the deadline bookkeeping both mechanisms share (stopTimer for
// instrumented modules, callCtx for the fallback runtime), guarded by their
// mutex. A timer that runs more than a whole deadline late means the process
// itself was not running (a cgroup CPU quota throttled it, it was stopped or
// starved): the guest most likely did not run either, so the call gets
// another deadline instead of being stopped for time it never had.
// Measured: under a 0.12-CPU quota a 2 µs call was stopped after 88 ms of
// wall time, one throttled period (edgellm scenario run
// testdata/scenarios/thermal-throttle.yaml).
type expiry struct {
	d       time.Duration
	at      time.Time
	graces  int    // extensions granted to the armed call
	granted uint64 // extensions granted in total (Stats.DeadlineGraces)
}

// maxGraces bounds the extensions of one call: a runaway guest in a process
// that is throttled all the time still stops, after at most 1+maxGraces
// deadlines of wall time that the timer could see.
const maxGraces = 3

// start begins a call's deadline.
func (e *expiry) start(now time.Time) { e.at, e.graces = now.Add(e.d), 0 }

// check decides at timer time now: due means stop the call; extended means
// a grace was granted and the timer must be reset for another deadline.
// Neither: a stale timer (an earlier call's) fired before this expiry.
func (e *expiry) check(now time.Time) (due, extended bool) {
	if now.Before(e.at) {
		return false, false
	}
	if now.Sub(e.at) > e.d && e.graces < maxGraces {
		e.graces++
		e.granted++
		e.at = now.Add(e.d)
		return false, true
	}
	return true, false
}

func (s *stopTimer) init(d time.Duration) {
	s.exp.d = d
	if d > 0 {
		s.timer = time.AfterFunc(time.Hour, s.fire)
		s.timer.Stop()
	}
}

func (s *stopTimer) close() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

// arm starts the deadline of one call on the instance whose flag is g.
func (s *stopTimer) arm(g api.MutableGlobal) {
	now := time.Now()
	s.mu.Lock()
	s.target, s.fired = g, false
	s.exp.start(now)
	s.mu.Unlock()
	s.timer.Reset(s.exp.d)
}

// disarm ends the call and reports whether the deadline fired during it
// (the flag is then set: the instance must be discarded).
func (s *stopTimer) disarm() (fired bool) {
	s.timer.Stop()
	s.mu.Lock()
	s.target = nil
	fired = s.fired
	s.mu.Unlock()
	return fired
}

// fire runs on the timer's goroutine.
func (s *stopTimer) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.target == nil {
		return
	}
	due, extended := s.exp.check(time.Now())
	if extended {
		s.timer.Reset(s.exp.d)
	}
	if due {
		s.target.Set(1)
		s.fired, s.target = true, nil
	}
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

// arm starts the deadline for one call.
func (c *callCtx) arm() context.Context {
	now := time.Now()
	c.mu.Lock()
	c.armed = true
	c.exp.start(now)
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
	due, extended := c.exp.check(time.Now())
	if extended {
		c.timer.Reset(c.exp.d)
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
