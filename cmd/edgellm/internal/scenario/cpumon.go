//go:build linux

package scenario

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/pressure"
	"github.com/edgellm/edgellm/host/sensors"
	"github.com/edgellm/edgellm/internal/cputime"
	"golang.org/x/sys/unix"
)

// probeCPU: CPU hogs are real processes everywhere; a cgroup, when one can
// be made, holds the engine and its hogs together (they share its CPU
// weight like apps in one slice).
func probeCPU(s *Spec) pressureMode {
	v, dirs, err := CheckCgroups(s.Name+"-probe", false, false)
	if err != nil {
		return pressureMode{real: true, desc: "real CPU hogs (pinned busy threads; no cgroup: " + err.Error() + ")"}
	}
	return pressureMode{real: true, cgroup: v, desc: fmt.Sprintf("real CPU hogs (pinned busy threads) in the engine's cgroup (v%d: %s)", v, dirs)}
}

// cpuMon is the monitor's CPU pressure state.
type cpuMon struct {
	cpus    []int // CPUs the runner and the engine may use
	hogs    []*pressure.CPUHog
	stopped []bool
	hogCPU  []time.Duration // each hog's CPU time when it stopped
	// At each gate position, read while the engine waits there: the
	// engine's CPU time, the hogs' total CPU time, the time.
	gateCPU, gateHogCPU map[int]time.Duration
	gateT               map[int]time.Time
	// At each gate too: the allowed CPUs' busy time (/proc/stat) and the
	// runner's own CPU time, for the other load between gates.
	gateBusy, gateSelf map[int]time.Duration
	mask               [2]uint64 // cpus as a mask (CPUs 0-127)
	samples            []othersSample
}

type othersSample struct{ tokens, others int }

func newCPUMon(c *CPU) (*cpuMon, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("cpu: affinity: %w", err)
	}
	m := &cpuMon{hogs: make([]*pressure.CPUHog, len(c.Hogs)), stopped: make([]bool, len(c.Hogs)),
		hogCPU: make([]time.Duration, len(c.Hogs)), gateCPU: map[int]time.Duration{},
		gateHogCPU: map[int]time.Duration{}, gateT: map[int]time.Time{},
		gateBusy: map[int]time.Duration{}, gateSelf: map[int]time.Duration{}}
	for i := 0; i < 1024; i++ {
		if set.IsSet(i) {
			m.cpus = append(m.cpus, i)
			if i < 128 {
				m.mask[i/64] |= 1 << (i % 64)
			}
		}
	}
	if len(m.cpus) == 0 {
		return nil, fmt.Errorf("cpu: no CPU in this process's affinity")
	}
	return m, nil
}

// applyCPU starts and stops the CPU hogs whose token has come and samples
// the machine's other runnable tasks.
func (m *monitor) applyCPU() error {
	c, cm := m.r.s.CPU, m.cpu
	if c == nil {
		return nil
	}
	if _, ok := cm.gateT[0]; !ok && m.pid > 0 {
		// The start of the first phase: the engine is loading (its CPU
		// counts as its own), for the other load over phase 0.
		m.cpuAtGate(0)
	}
	for i, h := range c.Hogs {
		if cm.hogs[i] != nil && !cm.stopped[i] && h.UntilToken != nil && m.tokens >= *h.UntilToken {
			cm.hogCPU[i], _ = cm.hogs[i].CPUTime()
			if err := cm.hogs[i].Stop(); err != nil {
				m.event(fmt.Sprintf("cpu hog %d: %v", i, err))
			}
			cm.stopped[i] = true
			m.event(fmt.Sprintf("cpu hog %d stopped at token %d (%v CPU used)", i, *h.UntilToken, cm.hogCPU[i].Round(time.Millisecond)))
		}
		if cm.hogs[i] == nil && m.tokens >= *h.AtToken {
			n := h.Threads
			if n == 0 {
				n = len(cm.cpus)
			}
			pin := make([]int, n)
			for j := range pin {
				pin[j] = cm.cpus[j%len(cm.cpus)]
			}
			// The gate reading first: the phase that ends here must not
			// see the new hog's first milliseconds.
			m.cpuAtGate(*h.AtToken)
			hog, err := pressure.StartCPUHog(m.hogCtx, pin, m.cg)
			if err != nil {
				return fmt.Errorf("cpu.hogs[%d]: %w", i, err)
			}
			cm.hogs[i] = hog
			m.event(fmt.Sprintf("cpu hog %d started at token %d: %d busy threads on CPUs %v", i, *h.AtToken, n, pin))
		}
	}
	if r, ok := runningTasks(); ok {
		threads := 1
		if n := len(m.res.Timeline); n > 0 && m.res.Timeline[n-1].Threads > 0 {
			threads = m.res.Timeline[n-1].Threads
		}
		hogs := 0
		for i, h := range cm.hogs {
			if h != nil && !cm.stopped[i] {
				hogs += len(h.CPUs)
			}
		}
		// The runner's own reading thread, the engine's decode threads and
		// the hogs are this run's; the rest is other load.
		cm.samples = append(cm.samples, othersSample{m.tokens, max(0, r-1-threads-hogs)})
	}
	return nil
}

// cpuAtGate records the engine's and the hogs' CPU time at gate position
// at, while the engine waits there.
func (m *monitor) cpuAtGate(at int) {
	cm := m.cpu
	if cm == nil {
		return
	}
	if _, done := cm.gateT[at]; done {
		return // read before this position's hogs started
	}
	if t, err := pressure.ProcessCPUTime(m.pid); err == nil {
		cm.gateCPU[at] = t
	}
	var hogs time.Duration
	for i, h := range cm.hogs {
		switch {
		case h == nil:
		case cm.stopped[i]:
			hogs += cm.hogCPU[i]
		default:
			t, _ := h.CPUTime()
			hogs += t
		}
	}
	cm.gateHogCPU[at], cm.gateT[at] = hogs, time.Now()
	if b, ok := sensors.ProcStatBusy(cm.mask); ok && len(cm.cpus) <= 128 {
		cm.gateBusy[at], cm.gateSelf[at] = b, cputime.Process()
	}
}

// stopCPUHogs stops the hogs still running.
func (m *monitor) stopCPUHogs() {
	if m.cpu == nil {
		return
	}
	for i, h := range m.cpu.hogs {
		if h != nil && !m.cpu.stopped[i] {
			h.Stop()
			m.cpu.stopped[i] = true
		}
	}
}

// runningTasks is the number of runnable tasks on the machine now, the
// fourth field of /proc/loadavg ("running/total"), this thread included.
func runningTasks() (int, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 4 {
		return 0, false
	}
	run, _, ok := bytes.Cut(f[3], []byte("/"))
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(run))
	return n, err == nil
}

// cpuPhases splits the run at the CPU positions and fills res.CPUPhases.
func (r *runner) cpuPhases(res *PolicyResult, m *monitor) {
	c, cm := r.s.CPU, m.cpu
	if c == nil || cm == nil {
		return
	}
	pos := c.positions(r.s.N)
	tl := res.Timeline
	for i := 0; i+1 < len(pos); i++ {
		from, to := pos[i], pos[i+1]
		ph := CPUPhase{From: from, To: to}
		for _, h := range c.Hogs {
			if *h.AtToken <= from && (h.UntilToken == nil || *h.UntilToken >= to) {
				n := h.Threads
				if n == 0 {
					n = len(cm.cpus)
				}
				ph.HogThreads += n
			}
		}
		if to <= len(tl) && to-from >= 2 {
			ph.TPS = meanTPS(tl[from:to])
			ph.ThreadsMin, ph.ThreadsLast = tl[from].Threads, tl[to-1].Threads
			for _, p := range tl[from:to] {
				ph.ThreadsMin, ph.ThreadsMax = min(ph.ThreadsMin, p.Threads), max(ph.ThreadsMax, p.Threads)
			}
		}
		c0, ok0 := cm.gateCPU[from]
		c1, ok1 := cm.gateCPU[to]
		if ok0 && ok1 && from > 0 {
			ph.CPUPerTokenMs = float64((c1 - c0).Microseconds()) / 1000 / float64(to-from)
			if wall := cm.gateT[to].Sub(cm.gateT[from]); wall > 0 {
				ph.CoresBusy = (c1 - c0).Seconds() / wall.Seconds()
			}
		}
		h0, ok0 := cm.gateHogCPU[from]
		h1, ok1 := cm.gateHogCPU[to]
		if ok0 && ok1 {
			ph.HogCPUMs = float64((h1 - h0).Microseconds()) / 1000
		}
		ph.OtherBusy, ph.OtherBusyRes = -1, 0
		b0, okb0 := cm.gateBusy[from]
		b1, okb1 := cm.gateBusy[to]
		e0, oke0 := cm.gateCPU[from]
		e1, oke1 := cm.gateCPU[to]
		if wall := cm.gateT[to].Sub(cm.gateT[from]); okb0 && okb1 && oke0 && oke1 && ok0 && ok1 && wall > 0 {
			// The allowed CPUs' busy time less the engine's, the hogs' and
			// the runner's: other processes' CPU over the phase. /proc/stat
			// is off by < 1 tick per CPU, the engine's /proc/PID/stat by
			// < 1 tick; the hogs (schedstat) and the runner (getrusage)
			// are exact.
			other := (b1 - b0) - (e1 - e0) - (h1 - h0) - (cm.gateSelf[to] - cm.gateSelf[from])
			ph.OtherBusy = max(0, other.Seconds()/wall.Seconds())
			ph.OtherBusyRes = float64(len(cm.cpus)+1) * cputime.TaskTick.Seconds() / wall.Seconds()
		}
		var others []int
		for _, s := range cm.samples {
			if s.tokens > from && s.tokens < to {
				others = append(others, s.others)
			}
		}
		if len(others) > 0 {
			slices.Sort(others)
			ph.OthersMedian = float64(others[len(others)/2])
		}
		res.CPUPhases = append(res.CPUPhases, ph)
	}
}
