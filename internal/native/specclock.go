package native

import "time"

// wallBase anchors the Speculator's default (monotonic wall) clock.
var wallBase = time.Now()

// SetClock makes the Speculator measure its costs (SpecSensors,
// StepTimes, SpecStats' draft and verify times, and so auto K) with clock
// instead of wall time. cputime.Thread gives the decoding thread's CPU
// time, which at one thread is all of the compute (ggml runs it on the
// calling thread) and is what a quiet core would take: on a shared
// machine wall time also counts the time other jobs held the core. The
// caller then keeps its goroutine on one OS thread
// (runtime.LockOSThread). nil restores wall time.
func (sp *Speculator) SetClock(clock func() time.Duration) { sp.clock = clock }

// now reads the measuring clock.
func (sp *Speculator) now() time.Duration {
	if sp.clock != nil {
		return sp.clock()
	}
	return time.Since(wallBase)
}
