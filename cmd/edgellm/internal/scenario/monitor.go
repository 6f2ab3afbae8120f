//go:build linux

package scenario

import (
	"context"
	"fmt"
	"github.com/edgellm/edgellm/cmd/edgellm/internal/runstats"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/pressure"
	"golang.org/x/sys/unix"
)

// monitor follows one engine run: its stats file, its memory, and the
// pressure schedule.
type monitor struct {
	r          *runner
	bits       float64 // bits per weight of the layers' sets in force (per_layer; 0: by tier)
	res        *PolicyResult
	cg         *pressure.Cgroup
	t0         time.Time
	event      func(string)
	since      func(time.Time) float64
	tail       *runstats.Tail
	tokens     int
	hogCtx     context.Context
	hogStarted []bool
	hogs       []*pressure.Hog
	hogIdx     []int
	hogsKilled uint64
	thermalAt  int // next thermal step
	tierFiles  []*os.File
	lastDrop   time.Time
	lastMem    time.Time // the last memory sample (cpuMemSampleEvery)
	onToken    func(n int)
	// gates are the token counts the engine waits at (ascending), gate the
	// pipe that releases it: one byte per position, written once the
	// pressure scheduled there is in place.
	gates []int
	gate  *os.File
	cpu   *cpuMon // CPU hogs (cpu scenarios)
	pid   int     // the engine
}

func (m *monitor) onStats(ev runstats.Event) {
	switch ev.Event {
	case runstats.Token:
		t := float64(ev.UnixUS-m.t0.UnixMicro()) / 1000
		m.res.Timeline = append(m.res.Timeline, TokenPoint{TMs: t, I: ev.I, Tier: ev.Tier, K: ev.K, Window: ev.Window, Threads: ev.Threads, Repack: ev.RepackLayers, Bits: m.bits})
		m.tokens = ev.I + 1
		if m.onToken != nil {
			m.onToken(m.tokens)
		}
	case runstats.Sets:
		if m.r.layers != nil {
			m.bits = m.r.layers.bits(ev.LayerSets)
		}
	case runstats.Start:
		m.res.Events = append(m.res.Events, Event{TMs: float64(ev.UnixUS-m.t0.UnixMicro()) / 1000,
			What: fmt.Sprintf("generation started on tier %d of %d", ev.Tier, ev.NTiers)})
	case runstats.End:
		m.res.DecodeTPS = ev.DecodeTPS
		m.res.PolicyCalls, m.res.PolicyChanges = ev.PolicyCalls, ev.PolicyChanges
		m.res.TierSwaps, m.res.PolicyFailures = ev.TierSwaps, ev.PolicyFailures
		if ev.Error != "" {
			m.res.Error = ev.Error
		}
	}
}

// step runs once per sample period.
func (m *monitor) step(pid int) error {
	m.pid = pid
	if err := m.tail.Poll(m.onStats); err != nil {
		return err
	}
	now := time.Now()
	if m.cpu != nil && now.Sub(m.lastMem) < cpuMemSampleEvery {
		return m.applyStep(now)
	}
	m.lastMem = now
	smp := MemSample{TMs: m.since(now)}
	if rss, pss, err := smapsRollup(pid); err == nil {
		smp.RSSMB, smp.PSSMB = float64(rss)/1024, float64(pss)/1024
		m.res.PeakRSSMB = max(m.res.PeakRSSMB, smp.RSSMB)
		m.res.PeakPSSMB = max(m.res.PeakPSSMB, smp.PSSMB)
	}
	if m.cg != nil {
		if u, err := m.cg.MemoryUsage(); err == nil {
			smp.CgroupMB = float64(u) / (1 << 20)
			m.res.PeakCgroupMB = max(m.res.PeakCgroupMB, smp.CgroupMB)
		}
	}
	if smp.RSSMB > 0 || smp.CgroupMB > 0 {
		m.res.Samples = append(m.res.Samples, smp)
	}
	return m.applyStep(now)
}

// cpuMemSampleEvery is how often a CPU scenario samples the engine's memory
// (smaps_rollup, the cgroup): the runner is another process on the CPUs the
// engine's policy reads, and sampling every 20 ms cost it 0.17 cores
// beside the synthetic 257 MiB model of cpu-contention-long (smaps_rollup
// walks every page of the engine); a CPU scenario keeps memory only for
// its peaks.
const cpuMemSampleEvery = 200 * time.Millisecond

// applyStep applies the pressure due at now and releases the token gate.
func (m *monitor) applyStep(now time.Time) error {
	m.dropPageCache(now)
	if err := m.startHogs(now); err != nil {
		return err
	}
	if err := m.applyThermal(); err != nil {
		return err
	}
	if err := m.applyCPU(); err != nil {
		return err
	}
	m.releaseGates()
	return nil
}

// releaseGates lets the engine past the gate positions it has reached. It
// runs after startHogs (which returns once a hog's pages are resident, or
// the hog died) and applyThermal (the quota is written), so the engine
// decodes token N only under the pressure scheduled for N. A write to an
// engine that has died (OOM-killed while a hog allocated) fails with EPIPE:
// nothing to release then.
func (m *monitor) releaseGates() {
	for len(m.gates) > 0 && m.tokens >= m.gates[0] {
		at := m.gates[0]
		m.gates = m.gates[1:]
		m.cpuAtGate(at)
		if _, err := m.gate.Write([]byte{1}); err == nil {
			m.event(fmt.Sprintf("pressure for token %d in place: engine released", at))
		}
	}
}

// openTierFiles opens the tier files to drop their page cache (see
// dropPageCache).
func (m *monitor) openTierFiles() {
	for _, t := range m.r.tiers {
		if f, err := os.Open(t.Path); err == nil {
			m.tierFiles = append(m.tierFiles, f)
		}
	}
}

// dropPageCache drops the tier files' clean page cache every 100 ms. The
// engine reads weights with read(2) into anonymous memory (--no-mmap); the
// page cache that reading leaves behind is charged to the cgroup and would
// count as "usage" for the policy although the kernel can drop it at any
// time. Dropping it keeps the cgroup's usage equal to what the engine and
// the hogs really hold.
func (m *monitor) dropPageCache(now time.Time) {
	if now.Sub(m.lastDrop) < 100*time.Millisecond {
		return
	}
	m.lastDrop = now
	for _, f := range m.tierFiles {
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	}
}

// startHogs starts the hogs whose time or token has come.
func (m *monitor) startHogs(now time.Time) error {
	if m.r.s.Memory == nil {
		return nil
	}
	for i, h := range m.r.s.Memory.Hogs {
		if m.hogStarted[i] {
			continue
		}
		due := (h.AtMs != nil && now.Sub(m.t0) >= time.Duration(*h.AtMs)*time.Millisecond) ||
			(h.AtToken != nil && m.tokens >= *h.AtToken)
		if !due {
			continue
		}
		m.hogStarted[i] = true
		trig := ""
		if h.AtMs != nil {
			trig = fmt.Sprintf("at_ms %d", *h.AtMs)
		} else {
			trig = fmt.Sprintf("at_token %d", *h.AtToken)
		}
		out := HogOutcome{MB: h.MB, Trigger: trig, TMs: m.since(now)}
		if m.cg == nil {
			out.Result = "SIMULATED (in the sensor trace only)"
			m.res.Hogs = append(m.res.Hogs, out)
			m.event(fmt.Sprintf("hog %d MiB (%s) SIMULATED", h.MB, trig))
			continue
		}
		hog, err := pressure.StartHog(m.hogCtx, h.MB, pressure.HogOptions{Cgroup: m.cg})
		if err != nil {
			return fmt.Errorf("memory.hogs[%d] (%d MiB, %s): cannot start: %w", i, h.MB, trig, err)
		}
		out.Ready = hog.Ready()
		m.res.Hogs = append(m.res.Hogs, out)
		m.hogs = append(m.hogs, hog)
		m.hogIdx = append(m.hogIdx, len(m.res.Hogs)-1)
		m.event(fmt.Sprintf("hog %d MiB started (%s), resident: %v", h.MB, trig, out.Ready))
	}
	return nil
}

// applyThermal applies the thermal steps whose token has come: the CPU
// quota here, the status through the trace the engine reads.
func (m *monitor) applyThermal() error {
	th := m.r.s.Thermal
	if th == nil {
		return nil
	}
	for m.thermalAt < len(th.Schedule) && m.tokens >= *th.Schedule[m.thermalAt].AtToken {
		st := th.Schedule[m.thermalAt]
		m.thermalAt++
		what := fmt.Sprintf("thermal %s at token %d: ", strings.ToLower(st.Status), *st.AtToken)
		switch {
		case m.cg == nil:
			what += fmt.Sprintf("CPU quota %g SIMULATED (not applied)", st.CPUs)
		case st.CPUs > 0:
			if err := m.cg.SetCPUQuota(st.CPUs); err != nil {
				return fmt.Errorf("thermal.schedule: %w", err)
			}
			what += fmt.Sprintf("CPU quota %g CPU", st.CPUs)
		default:
			if err := m.cg.RemoveCPUQuota(); err != nil {
				return fmt.Errorf("thermal.schedule: %w", err)
			}
			what += "no CPU quota"
		}
		m.event(what)
	}
	return nil
}

// stopHogs stops the hogs and records how they ended.
func (m *monitor) stopHogs() {
	for j, h := range m.hogs {
		hr := h.Stop()
		o := &m.res.Hogs[m.hogIdx[j]]
		o.Result, o.Killed = hr.String(), hr.Killed
		if hr.Killed && hr.Signal == syscall.SIGKILL {
			m.hogsKilled++
		}
	}
	m.hogs = nil
}

func (m *monitor) close() {
	m.stopHogs()
	m.stopCPUHogs()
	m.tail.Close()
	for _, f := range m.tierFiles {
		f.Close()
	}
}
