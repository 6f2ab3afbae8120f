package host

import (
	"time"

	"github.com/edgellm/edgellm/abi"
)

// stepClock keeps, per decode thread count, the engine's recent step time
// and its quiet baseline, for the ABI 1.3 fields StepTimeRatio and
// CurThreads. The recent time is an EWMA of the steps since the count last
// changed; the baseline is the lowest recent time seen at that count, so it
// is the step time of the quietest stretch so far. A step's time grows
// slowly with the context (attention reads more KV), so the baseline creeps
// up by baselineDrift per step to follow it rather than flag it as
// contention.
type stepClock struct {
	recent [maxClockThreads]float64 // seconds, EWMA since the count last changed
	base   [maxClockThreads]float64 // seconds, 0 = none yet
	steps  [maxClockThreads]int     // steps observed since the count last changed
	last   int                      // thread count of the previous observation
	lastDt float64                  // seconds, the previous observation's step
}

const (
	// maxClockThreads bounds the thread counts tracked.
	maxClockThreads = 64
	// stepAlpha is the EWMA weight of a new step: about the last 5 steps.
	stepAlpha = 0.2
	// baselineSteps is how many steps at a count pass before its recent time
	// may become a baseline (the EWMA has settled).
	baselineSteps = 4
	// baselineDrift is the baseline's creep per step: 0.1% (+10% per 100
	// steps), more than attention's growth per token at these sizes.
	baselineDrift = 1.001
)

// observe records one decode step of dt done at `threads` threads.
func (c *stepClock) observe(threads int, dt time.Duration) {
	if threads < 1 || threads > maxClockThreads || dt <= 0 {
		return
	}
	i := threads - 1
	if threads != c.last {
		c.steps[i], c.recent[i], c.last = 0, 0, threads
	}
	x := dt.Seconds()
	c.lastDt = x
	if c.steps[i] == 0 {
		c.recent[i] = x
	} else {
		c.recent[i] += stepAlpha * (x - c.recent[i])
	}
	c.steps[i]++
	if c.base[i] > 0 {
		c.base[i] *= baselineDrift
	}
	if c.steps[i] >= baselineSteps && (c.base[i] == 0 || c.recent[i] < c.base[i]) {
		c.base[i] = c.recent[i]
	}
}

// fill writes CurThreads (PresentCurrent is the caller's) and, once a
// baseline exists at the current count, StepTimeRatio with its presence bit.
func (c *stepClock) fill(threads int, s *abi.Sensors) {
	s.CurThreads = int32(threads)
	if threads < 1 || threads > maxClockThreads {
		return
	}
	i := threads - 1
	if c.last == threads && c.steps[i] >= baselineSteps && c.base[i] > 0 {
		s.StepTimeRatio = float32(c.recent[i] / c.base[i])
		s.Present |= abi.PresentStepBaseline
	}
}

// MaxInterval is the longest time between policy calls while decoding:
// when steps get slow (a CPU hog, thread oversubscription) the step cadence
// alone would leave the policy unasked for many seconds, exactly when it has
// something to fix (a policy that asked for a long cadence, or a step that
// takes seconds). Trace replays keep the pure step cadence.
const MaxInterval = 500 * time.Millisecond

// JumpRatio is the step time, over the quiet baseline at the same thread
// count, at which a single step makes the policy call due on live readings:
// a decode thread that lost its core to another app stalls the others at
// every barrier, and each such step costs several quiet ones, so the policy
// is asked at the next step rather than at its cadence.
const JumpRatio = 2.0

// jumped reports whether the last step observed took at least JumpRatio
// times the baseline of its thread count.
func (c *stepClock) jumped() bool {
	if c.last < 1 || c.last > maxClockThreads {
		return false
	}
	b := c.base[c.last-1]
	return b > 0 && c.lastDt >= JumpRatio*b
}

// overdue reports whether a policy call on live readings is due whatever
// the cadence: MaxInterval has passed since the last call, or the last step
// jumped (stepClock.jumped).
func (a *Adapter) overdue(now time.Time) bool {
	return a.wall && !a.lastCall.IsZero() && (now.Sub(a.lastCall) >= MaxInterval || a.steps.jumped())
}
