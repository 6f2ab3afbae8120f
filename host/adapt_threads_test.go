package host

import (
	"math"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
)

// The step clock's ratio is 1 on a steady engine, follows a slowdown at
// the same thread count, and starts over (no ratio until a baseline) at a
// new count.
func TestStepClock(t *testing.T) {
	var c stepClock
	var s abi.Sensors
	ms := time.Millisecond
	for range baselineSteps - 1 {
		c.observe(2, 40*ms)
	}
	c.fill(2, &s)
	if s.Present&abi.PresentStepBaseline != 0 || s.CurThreads != 2 {
		t.Fatalf("ratio before %d steps: %+v", baselineSteps, s.StepTimeRatio)
	}
	for range 20 {
		c.observe(2, 40*ms)
	}
	s = abi.Sensors{}
	c.fill(2, &s)
	if s.Present&abi.PresentStepBaseline == 0 || math.Abs(float64(s.StepTimeRatio)-1) > 0.05 {
		t.Fatalf("steady ratio %v (bit %v)", s.StepTimeRatio, s.Present&abi.PresentStepBaseline != 0)
	}
	// A CPU hog makes every step 4× slower: the EWMA gets there within ~15
	// steps, minus the baseline's drift.
	for range 30 {
		c.observe(2, 160*ms)
	}
	s = abi.Sensors{}
	c.fill(2, &s)
	if s.StepTimeRatio < 3.5 || s.StepTimeRatio > 4 {
		t.Fatalf("contended ratio %v, want in [3.5, 4]", s.StepTimeRatio)
	}
	// One thread: a new count, no baseline yet, then its own.
	c.observe(1, 80*ms)
	s = abi.Sensors{}
	c.fill(1, &s)
	if s.Present&abi.PresentStepBaseline != 0 || s.CurThreads != 1 {
		t.Fatalf("ratio at a fresh count: %v", s.StepTimeRatio)
	}
	for range 10 {
		c.observe(1, 80*ms)
	}
	s = abi.Sensors{}
	c.fill(1, &s)
	if math.Abs(float64(s.StepTimeRatio)-1) > 0.05 {
		t.Fatalf("one-thread ratio %v", s.StepTimeRatio)
	}
	// Back at two threads, quiet again: the old baseline (drifted) holds.
	for range 10 {
		c.observe(2, 40*ms)
	}
	s = abi.Sensors{}
	c.fill(2, &s)
	if s.StepTimeRatio < 0.9 || s.StepTimeRatio > 1.1 {
		t.Fatalf("two threads quiet again: ratio %v", s.StepTimeRatio)
	}
}

// Live readings: a policy call is due once MaxInterval has passed, whatever
// the step cadence; trace replays (wall false) keep the pure cadence.
func TestAdapterOverdue(t *testing.T) {
	now := time.Now()
	a := &Adapter{wall: true}
	if a.overdue(now) {
		t.Fatal("overdue before the first call")
	}
	a.lastCall = now.Add(-MaxInterval / 2)
	if a.overdue(now) {
		t.Fatal("overdue after half of MaxInterval")
	}
	a.lastCall = now.Add(-MaxInterval)
	if !a.overdue(now) {
		t.Fatal("not overdue after MaxInterval")
	}
	// A step that took JumpRatio × the baseline makes the call due at once;
	// a slower but ordinary step does not.
	a.lastCall = now
	for range baselineSteps {
		a.steps.observe(2, 10*time.Millisecond)
	}
	for _, c := range []struct {
		dt  time.Duration
		due bool
	}{{19 * time.Millisecond, false}, {21 * time.Millisecond, true}, {10 * time.Millisecond, false}} {
		a.steps.observe(2, c.dt)
		if got := a.overdue(now); got != c.due {
			t.Fatalf("step of %v over a 10 ms baseline: overdue %v, want %v", c.dt, got, c.due)
		}
	}
	a.steps.observe(2, time.Second)
	a.wall = false
	if a.overdue(now) {
		t.Fatal("a trace replay must keep the step cadence")
	}
}

// A wait at the scenario's token gate is not a step: after RefreshSensors
// the next step is not observed, so the wait does not jump the step clock.
func TestRefreshSkipsGateWait(t *testing.T) {
	a := &Adapter{wall: true, lastCall: time.Now(), next: 100} // no call due at step 5: only the step is observed
	a.cur.Threads = 1
	for range baselineSteps {
		a.steps.observe(1, 10*time.Millisecond)
	}
	a.lastTok = time.Now().Add(-time.Second) // a long wait at the gate
	a.RefreshSensors()
	if err := a.BeforeStep(5); err != nil {
		t.Fatal(err)
	}
	if a.steps.jumped() || a.steps.lastDt != 0.010 {
		t.Fatalf("the gate wait was observed as a step: last %v s, jumped %v", a.steps.lastDt, a.steps.jumped())
	}
}

// refreshCounter is a SensorSource that counts Refresh calls.
type refreshCounter struct{ n int }

func (r *refreshCounter) Fill(int, time.Duration, *abi.Sensors) {}
func (r *refreshCounter) Describe() string                      { return "refresh counter (test)" }
func (r *refreshCounter) Close() error                          { return nil }
func (r *refreshCounter) Refresh()                              { r.n++ }

// RefreshSensors (the scenario's token gate) re-reads the sensors at once
// and again rereadSteps steps later: the first reading also sees the runner
// that has just released the engine.
func TestRefreshSensorsRereads(t *testing.T) {
	src := &refreshCounter{}
	a := &Adapter{src: src, wall: true, lastCall: time.Now(), next: 1000} // no policy call due
	a.RefreshSensors()
	if src.n != 1 {
		t.Fatalf("%d refreshes after RefreshSensors, want 1", src.n)
	}
	for step := 1; step <= rereadSteps+3; step++ {
		if err := a.BeforeStep(step); err != nil {
			t.Fatal(err)
		}
		want := 1
		if step > rereadSteps {
			want = 2
		}
		if src.n != want {
			t.Fatalf("after step %d: %d refreshes, want %d", step, src.n, want)
		}
	}
}
