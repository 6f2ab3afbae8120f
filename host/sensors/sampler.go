package sensors

import (
	"time"

	"github.com/edgellm/edgellm/abi"
)

// DefaultInterval is the Sampler's default sampling interval: sensors change
// on the scale of seconds, decode steps take milliseconds.
const DefaultInterval = 200 * time.Millisecond

// sensorBits are the presence bits a Sampler owns (device readings); engine
// telemetry bits (tok/s, acceptance, context, layers, tiers) are left alone.
const sensorBits = abi.PresentMemAvailable | abi.PresentMemThreshold | abi.PresentMemTotal |
	abi.PresentLowMemory | abi.PresentTrimLevel | abi.PresentPSISome | abi.PresentPSIFull |
	abi.PresentCgroupLimit | abi.PresentCgroupUsage | abi.PresentRSS | abi.PresentPSS |
	abi.PresentThermalStatus | abi.PresentTemp | abi.PresentBattery | abi.PresentCharging

// Sampler reads the sensors at most once per Interval for a decode loop that
// asks every step: between readings it returns the cached snapshot after a
// single monotonic-clock comparison. A reading that took longer than
// Interval/1000 stretches the wait before the next one (readWait), so that
// sampling costs at most 0.1% of the time, up to 5 intervals.
//
// A Sampler is not safe for concurrent use: it belongs to the decode loop.
// Its Platform may be pushed to from any goroutine.
type Sampler struct {
	// Interval is the minimum time between two readings (≤ 0: every call).
	Interval time.Duration

	reader   *Reader
	platform *Platform
	snap     Snapshot
	last     time.Time     // when the sensors were last read
	cost     time.Duration // how long the last reading took (readWait)
	read     bool
	reads    uint64
}

// readCostDiv bounds the time spent reading sensors to 1/readCostDiv of the
// time (0.1%): when one reading took longer than Interval/readCostDiv (a
// loaded machine, where a pread of a /proc file waits for a CPU, or a
// device with many thermal zones), the next one waits readCostDiv times as
// long as it took, up to maxReadStretch intervals. Measured on a loaded
// 2-core VM: a full reading took ~260 µs (0.26% of a core at one every
// 100 ms) where the quiet budget is 50 µs (cost_test.go).
const (
	readCostDiv    = 1000
	maxReadStretch = 5
)

// readWait is the wait after a reading that took cost, for interval every.
func readWait(every, cost time.Duration) time.Duration {
	if every <= 0 {
		return every
	}
	return min(max(every, readCostDiv*cost), maxReadStretch*every)
}

// NewSampler samples r, overlaid with the readings pushed to p (p may be nil),
// every interval. The Sampler does not own r: close r after the last use.
func NewSampler(r *Reader, p *Platform, interval time.Duration) *Sampler {
	return &Sampler{Interval: interval, reader: r, platform: p}
}

// Snapshot returns the current snapshot, reading the sensors first when the
// interval has passed. The pointer stays valid, and its content may change
// on the next call; copy the value to keep it.
func (s *Sampler) Snapshot() *Snapshot {
	s.refresh(time.Now())
	return &s.snap
}

// Invalidate makes the next Snapshot or Fill read the sensors whatever the
// interval: for a caller that knows the readings have just changed (the
// scenario runner's token gate, after it applied memory pressure or started
// a CPU hog). The Reader's own cache of the CPU contention files
// (WithCPULoadInterval, 200 ms by default) is dropped too: before, a hog
// started at the gate reached cpu_runnable only up to 250 ms later, longer
// than a phase of the CPU contention scenario on a quiet machine.
func (s *Sampler) Invalidate() {
	s.read = false
	s.reader.invalidateCPULoad()
}

// Reads is the number of sensor readings taken so far.
func (s *Sampler) Reads() uint64 { return s.reads }

func (s *Sampler) refresh(now time.Time) {
	if s.read && now.Sub(s.last) < readWait(s.Interval, s.cost) { // monotonic clock comparison
		return
	}
	s.reader.Read(&s.snap)
	s.read = true
	s.reads++
	s.last = now
	s.cost = time.Since(now)
}

// Fill writes the device readings into dst: the sensor presence bits are
// cleared, the (possibly cached) file readings filled, then the fresh pushed
// readings overlaid. Engine telemetry fields and bits are not touched. It
// does not allocate.
func (s *Sampler) Fill(dst *abi.Sensors) {
	now := time.Now()
	s.refresh(now)
	dst.Present &^= sensorBits
	s.snap.Fill(dst)
	s.platform.Apply(dst, now)
}
