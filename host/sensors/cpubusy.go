package sensors

import (
	"os"
	"time"

	"github.com/edgellm/edgellm/internal/cputime"
)

// CPUBusy is CPU use integrated over a span (ABI 1.5), where Runnable is one
// instant of the run queue. Two things make the instant a poor guide to
// whether a core is free. It is a sample: a task that runs 1% of the time is
// caught now and then. And on kernels with EEVDF's delayed dequeue (Linux
// 6.12 and later) a task that goes to sleep can stay queued, and counted, for
// a while: an idle 2-core machine here reads 1-2 runnable tasks besides the
// reader most of the time while /proc/stat shows both CPUs idle.
//
// OtherBusy is the CPU time other processes used on the CPUs this process may
// use, divided by the span: the busy time of those CPUs in /proc/stat (user,
// nice, system, irq, softirq and steal; steal is time the hypervisor gave
// elsewhere) minus this process's own CPU time (getrusage, all threads). Its
// resolution is /proc/stat's 1/USER_HZ: each CPU's counter is truncated to
// a tick at both ends, so a span is off by less than one tick per CPU
// (±0.05 cores per CPU over 200 ms), which is why a span is at least
// MinCPUSpan long.
//
// PSISomeRecent is the share of the span in which some runnable task waited
// for a CPU, from /proc/pressure/cpu's "total" (µs): unlike avg10 it has no
// memory of the seconds before the span.
type CPUBusy struct {
	Present       bool
	Span          time.Duration
	OtherBusy     float64 // cores
	PSIPresent    bool
	PSISomeRecent float64 // percent
}

// MinCPUSpan is the shortest span CPUBusy is computed over: a reading taken
// sooner after the previous one (Sampler.Invalidate) repeats the previous
// span's values and keeps the start of the current one.
const MinCPUSpan = 150 * time.Millisecond

// cpuSample is one end of a span.
type cpuSample struct {
	ok     bool
	t      time.Time
	busy   uint64        // /proc/stat busy ticks of the allowed CPUs
	mask   [2]uint64     // the CPUs summed
	self   time.Duration // this process's CPU time
	psi    uint64        // CPU PSI some total, µs
	psiOK  bool
	result CPUBusy // the last span's values, repeated until the next span
}

// parseProcStat sums the busy ticks of the CPUs in mask from /proc/stat's
// per-CPU lines ("cpu3 user nice system idle iowait irq softirq steal ...").
// ok is false when a CPU of the mask has no line or a line cannot be read.
func parseProcStat(b []byte, mask [2]uint64) (busy uint64, ok bool) {
	var seen [2]uint64
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		name, rest := cutField(line)
		if len(name) < 3 || string(name[:3]) != "cpu" {
			break // the per-CPU lines come first
		}
		if len(name) == 3 {
			continue // the all-CPU line
		}
		id, ok := parseInt(name[3:])
		if !ok || id < 0 {
			return 0, false
		}
		if id >= maxCPUList || mask[id/64]&(1<<(id%64)) == 0 {
			continue
		}
		var f [8]uint64
		for i := range f {
			var v []byte
			v, rest = cutField(rest)
			if len(v) == 0 {
				if i < 4 {
					return 0, false // user, nice, system, idle: every kernel has them
				}
				break // iowait (2.5.41), irq, softirq (2.6.0), steal (2.6.11)
			}
			n, ok := parseInt(v)
			if !ok || n < 0 {
				return 0, false
			}
			f[i] = uint64(n)
		}
		busy += f[0] + f[1] + f[2] + f[5] + f[6] + f[7]
		seen[id/64] |= 1 << (id % 64)
	}
	if seen != mask || mask == [2]uint64{} {
		return 0, false
	}
	return busy, true
}

// cpuBusySpan closes the span from prev to cur: the readings at both ends
// must have summed the same CPUs. ok is false when the span cannot be
// computed (no start, CPUs changed, clock not advanced, counters went back).
func cpuBusySpan(prev, cur *cpuSample) (CPUBusy, bool) {
	if !prev.ok || !cur.ok || prev.mask != cur.mask || cur.busy < prev.busy {
		return CPUBusy{}, false
	}
	span := cur.t.Sub(prev.t)
	if span <= 0 {
		return CPUBusy{}, false
	}
	sec := span.Seconds()
	all := (time.Duration(cur.busy-prev.busy) * cputime.TaskTick).Seconds()
	self := (cur.self - prev.self).Seconds()
	c := CPUBusy{Present: true, Span: span, OtherBusy: max(0, (all-self)/sec)}
	if prev.psiOK && cur.psiOK && cur.psi >= prev.psi {
		c.PSIPresent = true
		c.PSISomeRecent = min(100, float64(cur.psi-prev.psi)/1e4/sec)
	}
	return c, true
}

// ProcStatBusy is the busy time (user, nice, system, irq, softirq, steal)
// of the CPUs in mask so far, from /proc/stat, in cputime.TaskTick steps (1/USER_HZ) per CPU: for a
// caller outside a Reader, such as the scenario runner, that measures other
// load between two points of its own. It allocates.
func ProcStatBusy(mask [2]uint64) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	busy, ok := parseProcStat(b, mask)
	return time.Duration(busy) * cputime.TaskTick, ok
}
