//go:build linux

package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edgellm/edgellm/internal/pressure"
	"github.com/edgellm/edgellm/internal/runargs"
	"github.com/edgellm/edgellm/internal/runstats"
	"golang.org/x/sys/unix"
)

// Options configure Run.
type Options struct {
	// OutDir receives the report, charts, the synthesized model and each
	// policy's engine output. Required.
	OutDir string
	// Exe is the edgellm binary run as the engine ("" = this executable).
	Exe string
	// Env is added to the engine's environment.
	Env []string
	// Simulate forces trace-only (simulated) pressure even where cgroups
	// can be written.
	Simulate bool
	// SampleEvery is how often the runner samples the engine (default 20 ms).
	SampleEvery time.Duration
	// OnEngineStart, if set, is called when an engine process has started
	// (tests use it to interrupt a run and check the cleanup).
	OnEngineStart func(pid int, cgroupDirs []string)
	// Logf receives progress lines (nil: discarded).
	Logf func(format string, args ...any)
}

// pressureMode is decided once per run.
type pressureMode struct {
	real   bool
	desc   string // for the report
	cgroup int    // cgroup version when real
}

// Run runs every policy of s, one after another, under the scenario's
// pressure and returns the report (not yet written: see WriteReport). Every
// cgroup and process it creates is removed before it returns, also when ctx
// is cancelled.
func Run(ctx context.Context, s *Spec, o Options) (*Report, error) {
	if o.OutDir == "" {
		return nil, errors.New("scenario: no output directory")
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 20 * time.Millisecond
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		o.Exe = exe
	}
	out, err := filepath.Abs(o.OutDir)
	if err != nil {
		return nil, err
	}
	o.OutDir = out
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	tiers, err := prepareTiers(ctx, s, out, o.Logf)
	if err != nil {
		return nil, err
	}
	mode := probe(s, o)
	o.Logf("scenario %s: pressure %s", s.Name, mode.desc)
	rep := &Report{Scenario: s.Name, File: s.File, Pressure: mode.desc, Simulated: !mode.real, Tiers: tiers,
		Prompt: s.Prompt, N: s.N, Threads: s.Threads, Ctx: s.Ctx, Memory: s.Memory, Thermal: s.Thermal}
	r := &runner{s: s, o: o, mode: mode, tiers: tiers}
	if r.sensors, err = r.sensorArgs(); err != nil {
		return nil, err
	}
	rep.Sensors = r.sensorsDesc
	for _, p := range s.Policies {
		wasm, err := preparePolicy(ctx, s, p, out, o.Logf)
		if err != nil {
			return nil, err
		}
		o.Logf("scenario %s: policy %s (%s)", s.Name, p.Name, wasm)
		res, err := r.runPolicy(ctx, p, wasm)
		if err != nil {
			return nil, fmt.Errorf("scenario %s, policy %s: %w", s.Name, p.Name, err)
		}
		o.Logf("scenario %s: policy %s: %s, %d tokens, mean %.1f tok/s, %d tier swaps, %d policy failures, OOM kills %d, peak RSS %.1f MiB%s",
			s.Name, p.Name, res.Outcome, res.Tokens, res.MeanTPS, res.TierSwaps, res.PolicyFailures, res.OOMKills, res.PeakRSSMB, simNote(mode))
		rep.Policies = append(rep.Policies, res)
	}
	return rep, nil
}

func simNote(m pressureMode) string {
	if m.real {
		return ""
	}
	return " [SIMULATED pressure]"
}

// probe decides between real (cgroup) and simulated pressure by creating a
// cgroup and writing the limits the scenario needs.
func probe(s *Spec, o Options) pressureMode {
	if o.Simulate {
		return pressureMode{desc: "SIMULATED (trace-only pressure: requested with --simulate)"}
	}
	cg, err := pressure.NewCgroup(s.Name + "-probe")
	if err != nil {
		return pressureMode{desc: "SIMULATED (trace-only pressure: " + err.Error() + ")"}
	}
	defer cg.Close()
	if s.Memory != nil {
		if err := cg.SetMemoryLimit(int64(s.Memory.LimitMB) << 20); err != nil {
			return pressureMode{desc: "SIMULATED (trace-only pressure: cgroup memory limit refused: " + err.Error() + ")"}
		}
	}
	if s.Thermal != nil {
		if err := cg.SetCPUQuota(0.5); err != nil {
			return pressureMode{desc: "SIMULATED (trace-only pressure: cgroup CPU quota refused: " + err.Error() + ")"}
		}
	}
	return pressureMode{real: true, cgroup: cg.Version,
		desc: fmt.Sprintf("real (cgroup v%d: memory %s, cpu %s)", cg.Version, filepath.Dir(cg.MemDir), filepath.Dir(cg.CPUDir))}
}

type runner struct {
	s           *Spec
	o           Options
	mode        pressureMode
	tiers       []Tier
	sensors     []string // engine arguments choosing its sensors
	sensorsDesc string
}

// sensorArgs writes the trace the engine's policy reads, if any. Traces are
// indexed by decode step: --trace-step-ms 1 and t_ms = token index, so the
// status the policy sees at step n is the one scheduled for token n, the
// same token at which the runner changes the CPU quota.
func (r *runner) sensorArgs() ([]string, error) {
	s := r.s
	if s.Memory != nil && r.mode.real && s.Thermal == nil {
		r.sensorsDesc = "live (the engine's own cgroup, /proc/meminfo; real pressure)"
		return runargs.SensorFlags("live", 20*time.Millisecond, 0), nil
	}
	path := filepath.Join(r.o.OutDir, "sensors.jsonl")
	recs, err := r.traceRecords()
	if err != nil {
		return nil, err
	}
	if err := writeTrace(path, recs); err != nil {
		return nil, err
	}
	switch {
	case s.Memory != nil && r.mode.real: // and thermal
		r.sensorsDesc = "live (the engine's own cgroup, /proc/meminfo; real pressure) overlaid with the thermal status of trace " + path + " (1 ms per decode step; the CPU quota is real)"
		return runargs.SensorFlags("live+trace:"+path, 20*time.Millisecond, 1), nil
	case s.Memory != nil:
		r.sensorsDesc = "trace " + path + " (SIMULATED memory readings, 1 ms per decode step)"
	default:
		r.sensorsDesc = "trace " + path + " (thermal status per decode step, 1 ms per step; the CPU quota is real unless the pressure is simulated)"
	}
	return runargs.SensorFlags("trace:"+path, 0, 1), nil
}

// runPolicy runs the engine with one policy under the pressure.
func (r *runner) runPolicy(ctx context.Context, p Policy, wasm string) (res PolicyResult, err error) {
	s := r.s
	res = PolicyResult{Name: p.Name, Wasm: wasm, Events: []Event{}, Timeline: []TokenPoint{}, Samples: []MemSample{}}
	dir := filepath.Join(r.o.OutDir, p.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	statsPath, logitsPath := filepath.Join(dir, "stats.jsonl"), filepath.Join(dir, "logits.bin")
	os.Remove(statsPath)
	os.Remove(logitsPath)
	res.StdoutFile, res.StderrFile = filepath.Join(dir, "stdout.txt"), filepath.Join(dir, "stderr.txt")
	stdout, err := os.Create(res.StdoutFile)
	if err != nil {
		return res, err
	}
	defer stdout.Close()
	stderr, err := os.Create(res.StderrFile)
	if err != nil {
		return res, err
	}
	defer stderr.Close()

	var cg *pressure.Cgroup
	if r.mode.real {
		if cg, err = pressure.NewCgroup(s.Name + "-" + p.Name); err != nil {
			return res, err
		}
		defer func() {
			if cerr := cg.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
		if s.Memory != nil {
			if err := cg.SetMemoryLimit(int64(s.Memory.LimitMB) << 20); err != nil {
				return res, err
			}
		}
	}

	paths := make([]string, len(r.tiers))
	for i, t := range r.tiers {
		paths[i] = t.Path
	}
	args := runargs.Run{Tiers: paths, NoMmap: true, StatsJSON: statsPath, LogitsOut: logitsPath,
		Policy: wasm, PolicyInsecure: true, N: s.N, Temp: 0, Threads: s.Threads, Ctx: s.Ctx, Prompt: s.Prompt}.Argv()
	args = append(args, r.sensors...)
	cmd := exec.Command(r.o.Exe, args...)
	cmd.Env = append(os.Environ(), r.o.Env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	switch {
	case cg != nil && cg.Version == 1:
		// The engine enters its cgroups itself, first thing (enter_linux.go):
		// moving it after Start would let its model load be charged outside.
		procs := []string{filepath.Join(cg.MemDir, "cgroup.procs")}
		if cg.CPUDir != "" && cg.CPUDir != cg.MemDir {
			procs = append(procs, filepath.Join(cg.CPUDir, "cgroup.procs"))
		}
		cmd.Env = append(cmd.Env, enterEnv+"="+strings.Join(procs, string(os.PathListSeparator)))
		err = cmd.Start()
	case cg != nil:
		err = cg.Start(cmd) // v2: cloned straight into the cgroup
	default:
		err = cmd.Start()
	}
	if err != nil {
		return res, fmt.Errorf("start engine: %w", err)
	}
	t0 := time.Now()
	pid := cmd.Process.Pid
	since := func(t time.Time) float64 { return float64(t.Sub(t0).Microseconds()) / 1000 }
	event := func(what string) { res.Events = append(res.Events, Event{TMs: since(time.Now()), What: what}) }
	event(fmt.Sprintf("engine started (pid %d)", pid))
	if cg != nil {
		res.CgroupDirs = append(res.CgroupDirs, cg.MemDir)
		if cg.CPUDir != "" && cg.CPUDir != cg.MemDir {
			res.CgroupDirs = append(res.CgroupDirs, cg.CPUDir)
		}
	}
	if r.o.OnEngineStart != nil {
		r.o.OnEngineStart(pid, res.CgroupDirs)
	}

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	m := &monitor{r: r, res: &res, cg: cg, t0: t0, event: event, since: since,
		tail: runstats.NewTail(statsPath), hogStarted: make([]bool, r.nHogs()), hogCtx: ctx}
	defer m.close()
	if cg != nil && s.Memory != nil {
		m.openTierFiles()
	}
	tick := time.NewTicker(r.o.SampleEvery)
	defer tick.Stop()
	var waitErr error
	cancelled := false
loop:
	for {
		select {
		case waitErr = <-exited:
			break loop
		case <-ctx.Done():
			cancelled = true
			cmd.Process.Kill()
			<-exited
			break loop
		case <-tick.C:
			if err := m.step(pid); err != nil {
				cmd.Process.Kill()
				<-exited
				return res, err
			}
		}
	}
	if cancelled {
		return res, ctx.Err()
	}
	event("engine exited")
	if err := m.tail.Poll(m.onStats); err != nil {
		return res, err
	}
	m.stopHogs()
	if cg != nil {
		if ev, err := cg.Events(); err == nil {
			res.OOMKills = ev.OOMKill
		}
		if st, err := cg.CPUStats(); err == nil && s.Thermal != nil {
			res.CPUThrottled, res.CPUThrottledMs = st.Throttled, float64(st.ThrottledTime.Microseconds())/1000
		}
	}
	r.outcome(&res, waitErr, m)
	if q, err := r.measureQuality(ctx, logitsPath, &res); err != nil {
		res.QualityError = err.Error()
	} else {
		res.Quality = q
	}
	return res, nil
}

func (r *runner) nHogs() int {
	if r.s.Memory == nil {
		return 0
	}
	return len(r.s.Memory.Hogs)
}

// outcome fills the verdict and the derived figures.
func (r *runner) outcome(res *PolicyResult, waitErr error, m *monitor) {
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		res.Outcome, res.Completed = "completed", true
	case errors.As(waitErr, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		res.ExitCode = ee.ExitCode()
		switch {
		case ws.Signaled() && ws.Signal() == syscall.SIGKILL && res.OOMKills > m.hogsKilled:
			res.Outcome, res.OOMKilled = "oom-killed", true
		case ws.Signaled():
			res.Outcome = "killed by signal " + ws.Signal().String()
		default:
			res.Outcome = fmt.Sprintf("failed (exit %d)", res.ExitCode)
		}
	default:
		res.Outcome = "failed: " + waitErr.Error()
	}
	if !res.Completed && !res.OOMKilled && res.Error == "" {
		res.Error = lastLine(res.StderrFile)
	}
	if !res.Completed {
		if res.OOMKilled {
			m.event(fmt.Sprintf("engine OOM-killed after %d tokens (cgroup oom_kill %d)", len(res.Timeline), res.OOMKills))
		}
	}
	res.Tokens = len(res.Timeline)
	tl := res.Timeline
	if n := len(tl); n >= 2 {
		res.MeanTPS = float64(n-1) / ((tl[n-1].TMs - tl[0].TMs) / 1000)
		var wsum, tsum float64
		for j := 1; j < n; j++ {
			dt := tl[j].TMs - tl[j-1].TMs
			if tier := tl[j].Tier; tier >= 0 && tier < len(r.tiers) {
				wsum += dt * r.tiers[tier].BitsPerWeight
				tsum += dt
			}
		}
		if tsum > 0 {
			res.MeanBitsPerWeight = wsum / tsum
		}
	} else if n == 1 && tl[0].Tier < len(r.tiers) {
		res.MeanBitsPerWeight = r.tiers[tl[0].Tier].BitsPerWeight
	}
	if th := r.s.Thermal; th != nil {
		from := -1
		for _, st := range th.Schedule {
			if st.CPUs > 0 {
				from = *st.AtToken
				break
			}
		}
		if from >= 0 && len(tl) > from+1 {
			seg := tl[from:]
			res.MeanTPSThrottled = float64(len(seg)-1) / ((seg[len(seg)-1].TMs - seg[0].TMs) / 1000)
		}
	}
	r.swapEvents(res)
}

// swapEvents adds the engine's tier decisions (its stderr lines
// "[policy step N: …]") as events at the time of token N.
func (r *runner) swapEvents(res *PolicyResult) {
	b, err := os.ReadFile(res.StderrFile)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "[policy step ")
		if !ok {
			continue
		}
		num, what, _ := strings.Cut(rest, ":")
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		t := -1.0
		if n > 0 && n <= len(res.Timeline) {
			t = res.Timeline[n-1].TMs
		}
		res.Events = append(res.Events, Event{TMs: t, What: "policy at step " + num + ":" + strings.TrimSuffix(what, "]")})
		if !res.Completed && strings.Contains(what, "(swap ") {
			res.TierSwaps++ // no end line from a killed engine: count its swaps here
		}
	}
}

func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// monitor follows one engine run: its stats file, its memory, and the
// pressure schedule.
type monitor struct {
	r          *runner
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
}

func (m *monitor) onStats(ev runstats.Event) {
	switch ev.Event {
	case "token":
		t := float64(ev.UnixUS-m.t0.UnixMicro()) / 1000
		m.res.Timeline = append(m.res.Timeline, TokenPoint{TMs: t, I: ev.I, Tier: ev.Tier, K: ev.K, Window: ev.Window, Threads: ev.Threads})
		m.tokens = ev.I + 1
	case "start":
		m.res.Events = append(m.res.Events, Event{TMs: float64(ev.UnixUS-m.t0.UnixMicro()) / 1000,
			What: fmt.Sprintf("generation started on tier %d of %d", ev.Tier, ev.NTiers)})
	case "end":
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
	if err := m.tail.Poll(m.onStats); err != nil {
		return err
	}
	now := time.Now()
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
	m.dropPageCache(now)
	if err := m.startHogs(now); err != nil {
		return err
	}
	return m.applyThermal()
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
	m.tail.Close()
	for _, f := range m.tierFiles {
		f.Close()
	}
}
