package kernels

import (
	"runtime"
	"time"
)

// passEvery is how often a goroutine that calls compute back to back passes
// through the Go scheduler: half of the runtime's forcePreemptNS (10 ms).
//
// Why: a cgo call is a system call to the Go runtime, and a goroutine that
// does nothing but decode never goes through the scheduler, so its P's
// schedtick stands still. Every 10 ms sysmon then takes the P "from the long
// system call" (runtime.retake, sysretake), and each retake resets sysmon's
// own sleep to 20 µs, from which it backs off over about 60 wake-ups. On
// stories260K (0.55 ms steps) that was 5–7% of a core outside the compute
// threads, mostly sysmon. TestDecodeCPUBound, quiet machine, test binaries
// before and after run alternately three times: process CPU ÷ wall at one
// thread 1.045–1.074 before, 0.998–1.000 after; CPU outside the busiest
// threads 0.046–0.074 → 0.009–0.015 at one thread and 0.053–0.075 →
// 0.004–0.007 at two; steps per second unchanged within the runs' spread.
// A single call longer than 10 ms (a 1B model's step
// here) is still retaken once: that part remains (docs/BENCHMARKS.md
// "Cores busy at one thread").
const passEvery = 5 * time.Millisecond

// schedPass remembers when its owner last passed through the scheduler (the
// zero time: never). Not safe for concurrent use: one per Context or
// CPUBackend, which are used by one goroutine at a time.
type schedPass struct{ last time.Time }

// pass calls runtime.Gosched when passEvery has gone by since the last time
// (about 1 µs on an unlocked goroutine with nothing else to run; a goroutine
// locked to its thread pays a thread hand-off, tens of µs, every 5 ms).
func (p *schedPass) pass() {
	if time.Since(p.last) >= passEvery {
		p.last = time.Now()
		runtime.Gosched()
	}
}
