package bench

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgellm/edgellm/host/sensors"
	"github.com/edgellm/edgellm/internal/cputime"
)

// DefaultMemInterval is the MemSampler tick: fast enough to catch the peak of
// a load or a prefill, slow enough not to steal a core.
const DefaultMemInterval = 15 * time.Millisecond

// smapsDuty bounds the smaps_rollup walk to 1/smapsDuty of one core: after a
// read that cost c, the next waits at least smapsDuty·c. At 600 MiB resident
// a walk costs about 4 ms, so PSS is then read about every 400 ms while RSS
// (statm) stays at the tick, and Stop always takes a last walk. It was 10
// until a quiet run showed the sampler itself as 0.1 of a core in "cores
// busy" (1.13 at one thread, 1.03 without it), and on a 2-core machine at
// -t 2 it takes a core from a compute thread the others then wait for.
const smapsDuty = 100

// ErrNoSmaps is returned when /proc/self/smaps_rollup cannot be read (Linux
// before 4.14, or a restricted /proc): PSS cannot be measured.
var ErrNoSmaps = errors.New("bench: /proc/self/smaps_rollup is not readable (PSS needs Linux 4.14+)")

// Peak is what a MemSampler saw between Start and Stop, in bytes.
type Peak struct {
	RSS int64 // max of statm resident and smaps_rollup Rss
	PSS int64 // max smaps_rollup Pss
	// Samples counts statm readings, SmapsSamples smaps_rollup walks.
	Samples, SmapsSamples int
	// SmapsCost is the longest smaps_rollup walk; SmapsInterval the longest
	// gap between walks.
	SmapsCost, SmapsInterval time.Duration
}

// MemSampler records the process's peak RSS and PSS from a background
// goroutine. Create it with NewMemSampler, bracket the measured work with
// Start and Stop, and Close it when done. Its methods must be called from one
// goroutine.
type MemSampler struct {
	tick  time.Duration
	statm *sensors.Reader
	smaps *sensors.Reader

	mu      sync.Mutex // guards peak while the goroutine runs
	peak    Peak
	lastPSS time.Time
	nextPSS time.Time
	st, sm  sensors.Snapshot // each reader overwrites every field of its own

	// cpu is the thread CPU time (ns) the background goroutine spent in its
	// samples: the bench's own cost, which CPU subtracts from the process's.
	cpu atomic.Int64

	stop chan struct{}
	done chan struct{}
}

// CPU is the CPU time the sampler's background goroutine has spent reading
// so far (its thread's clock around each reading). The readings Start, Stop
// and Now take run on the caller's thread and are not counted here.
func (m *MemSampler) CPU() time.Duration { return time.Duration(m.cpu.Load()) }

// NewMemSampler opens /proc/self/statm and /proc/self/smaps_rollup. tick ≤ 0
// means DefaultMemInterval.
func NewMemSampler(tick time.Duration) (*MemSampler, error) {
	if tick <= 0 {
		tick = DefaultMemInterval
	}
	st, err := sensors.NewReader(sensors.WithSources(sensors.SourceStatm))
	if err != nil {
		return nil, err
	}
	sm, err := sensors.NewReader(sensors.WithSources(sensors.SourceSmaps), sensors.WithSmapsInterval(0))
	if err != nil {
		st.Close()
		return nil, err
	}
	m := &MemSampler{tick: tick, statm: st, smaps: sm}
	m.smaps.Read(&m.sm)
	if !m.sm.Smaps.Present || m.sm.Smaps.Pss <= 0 {
		m.Close()
		return nil, ErrNoSmaps
	}
	return m, nil
}

// Close stops the sampler if it runs and closes its files.
func (m *MemSampler) Close() error {
	if m.stop != nil {
		m.Stop()
	}
	m.statm.Close()
	m.smaps.Close()
	return nil
}

// Start resets the peak, takes a first reading and starts sampling.
func (m *MemSampler) Start() {
	if m.stop != nil {
		m.Stop()
	}
	m.peak = Peak{}
	m.nextPSS, m.lastPSS = time.Time{}, time.Time{}
	m.sample(true)
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go m.loop(m.stop, m.done)
}

// Stop ends sampling, takes a final reading (smaps_rollup included) and
// returns the peak since Start.
func (m *MemSampler) Stop() Peak {
	if m.stop != nil {
		close(m.stop)
		<-m.done
		m.stop, m.done = nil, nil
	}
	m.sample(true)
	return m.peak
}

// Peek returns the peak so far without stopping.
func (m *MemSampler) Peek() Peak {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

func (m *MemSampler) loop(stop, done chan struct{}) {
	defer close(done)
	// Locked, so that the thread clock read around each sample is this
	// goroutine's: unlocked, it can resume on another thread after the
	// smaps_rollup read (a syscall long enough for its P to be retaken).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := time.NewTicker(m.tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			m.sample(false)
		}
	}
}

// Now reads RSS and PSS immediately (both files), in bytes, and counts the
// reading towards the peak when the sampler runs.
func (m *MemSampler) Now() (rss, pss int64) {
	m.sample(true)
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(m.st.Statm.Resident, m.sm.Smaps.Rss), m.sm.Smaps.Pss
}

// sample reads statm, and smaps_rollup when due (or when force is set). The
// lock covers the readers too: Now may run beside the goroutine.
func (m *MemSampler) sample(force bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !force {
		// loop has locked the goroutine to its thread.
		c0 := cputime.Thread()
		defer func() { m.cpu.Add(int64(cputime.Thread() - c0)) }()
	}
	m.statm.Read(&m.st)
	rss := m.st.Statm.Resident
	now := time.Now()
	p := &m.peak
	p.Samples++
	p.RSS = max(p.RSS, rss)
	if !force && now.Before(m.nextPSS) {
		return
	}
	m.smaps.Read(&m.sm)
	cost := time.Since(now)
	sm := m.sm.Smaps
	if !sm.Present {
		return
	}
	p.SmapsSamples++
	p.RSS = max(p.RSS, sm.Rss)
	p.PSS = max(p.PSS, sm.Pss)
	p.SmapsCost = max(p.SmapsCost, cost)
	if !m.lastPSS.IsZero() && !force {
		p.SmapsInterval = max(p.SmapsInterval, now.Sub(m.lastPSS))
	}
	m.lastPSS = now
	m.nextPSS = now.Add(max(m.tick, smapsDuty*cost))
}
