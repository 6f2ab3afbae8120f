//go:build linux

package scenario

import (
	"context"
	"fmt"
	"github.com/edgellm/edgellm/cmd/edgellm/internal/runargs"
	"github.com/edgellm/edgellm/cmd/edgellm/internal/runstats"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/pressure"
)

// runPolicy runs the engine with one policy under the pressure: start the
// engine, monitor it while it decodes (applying the pressure on schedule),
// then collect the result.
func (r *runner) runPolicy(ctx context.Context, p Policy, wasm string) (res PolicyResult, err error) {
	res = PolicyResult{Name: p.Name, Wasm: wasm, Events: []Event{}, Timeline: []TokenPoint{}, Samples: []MemSample{}}
	e := &engineRun{r: r, res: &res}
	defer func() {
		if cerr := e.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if p.PerLayer != nil {
		if e.manifest, err = r.preparePerLayer(ctx, p); err != nil {
			return res, err
		}
	}
	if err := e.start(p, wasm); err != nil {
		return res, err
	}
	m := &monitor{r: r, res: &res, cg: e.cg, t0: e.t0, event: e.event, since: e.since, onToken: r.o.OnToken,
		tail: runstats.NewTail(e.statsPath), hogStarted: make([]bool, r.nHogs()), hogCtx: ctx,
		gates: r.gatePositions(), gate: e.gateW}
	defer m.close()
	if c := r.s.CPU; c != nil {
		if m.cpu, err = newCPUMon(c); err != nil {
			return res, err
		}
	}
	if e.cg != nil && r.s.Memory != nil {
		m.openTierFiles()
	}
	waitErr, err := e.monitor(ctx, m)
	if err != nil {
		return res, err
	}
	return res, e.collect(ctx, m, waitErr)
}

// engineRun is one engine process and what it leaves behind.
type engineRun struct {
	r                     *runner
	res                   *PolicyResult
	statsPath, logitsPath string
	stdout, stderr        *os.File
	cg                    *pressure.Cgroup
	cmd                   *exec.Cmd
	gateW                 *os.File // write end of the token gate
	manifest              string   // per_layer contenders: the precision manifest
	t0                    time.Time
	exited                chan error
	waited                bool         // the engine's exit status has been received
	client                *serveClient // serve mode's request stream (nil: run mode)
}

func (e *engineRun) since(t time.Time) float64 { return float64(t.Sub(e.t0).Microseconds()) / 1000 }

func (e *engineRun) event(what string) {
	e.res.Events = append(e.res.Events, Event{TMs: e.since(time.Now()), What: what})
}

// start creates the output files and the cgroup and starts the engine.
func (e *engineRun) start(p Policy, wasm string) error {
	r, s, res := e.r, e.r.s, e.res
	dir := filepath.Join(r.o.OutDir, p.Name)
	if r.s.Repeats > 1 {
		dir = filepath.Join(dir, fmt.Sprintf("repeat-%d", r.repeat+1))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	e.statsPath, e.logitsPath = filepath.Join(dir, "stats.jsonl"), filepath.Join(dir, "logits.bin")
	os.Remove(e.statsPath)
	os.Remove(e.logitsPath)
	res.StdoutFile, res.StderrFile = filepath.Join(dir, "stdout.txt"), filepath.Join(dir, "stderr.txt")
	var err error
	if e.stdout, err = os.Create(res.StdoutFile); err != nil {
		return err
	}
	if e.stderr, err = os.Create(res.StderrFile); err != nil {
		return err
	}
	if r.mode.cgroup > 0 {
		if e.cg, err = pressure.NewCgroup(s.Name + "-" + p.Name); err != nil {
			return err
		}
		if s.Memory != nil {
			if err := e.cg.SetMemoryLimit(int64(s.Memory.LimitMB) << 20); err != nil {
				return err
			}
		}
	}

	paths := make([]string, len(r.tiers))
	for i, t := range r.tiers {
		paths[i] = t.Path
	}
	// The llamacpp engine reads the weights into memory (--no-mmap: the
	// cgroup charges them as the engine's own); the native engine maps
	// them and releases a tier's pages itself when it steps down.
	ra := runargs.Run{Tiers: paths, Engine: s.Engine, NoMmap: s.Engine == "llamacpp", Repack: s.Repack, StatsJSON: e.statsPath, LogitsOut: e.logitsPath,
		Policy: wasm, PolicyInsecure: true, N: s.N, Temp: 0, Threads: p.threads(s), Ctx: s.Ctx, Prompt: s.Prompt}
	if pl := p.PerLayer; pl != nil {
		ra.Tiers, ra.Model, ra.LayerSets, ra.Manifest, ra.TokTarget = nil, paths[0], paths[1:], e.manifest, pl.TokTarget
	}
	args := ra.Argv()
	args = append(args, r.sensors...)
	if s.Serve != nil {
		args = r.serveArgv(paths, e.statsPath, wasm)
	}
	cmd := exec.Command(r.o.Exe, args...)
	cmd.Env = append(os.Environ(), r.o.Env...)
	cmd.Stdout, cmd.Stderr = e.stdout, e.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var gateR *os.File
	if gates := r.gatePositions(); len(gates) > 0 {
		// The token gate (cmd/edgellm/gate.go): the engine waits at each
		// position for a byte the monitor writes once the pressure is on.
		if gateR, e.gateW, err = os.Pipe(); err != nil {
			return err
		}
		defer gateR.Close() // the child holds its own copy
		cmd.ExtraFiles = []*os.File{gateR}
		cmd.Args = append(cmd.Args, "--gate-at", joinInts(gates), "--gate-fd", "3")
	}
	switch cg := e.cg; {
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
		return fmt.Errorf("start engine: %w", err)
	}
	e.cmd, e.t0 = cmd, time.Now()
	pid := cmd.Process.Pid
	e.event(fmt.Sprintf("engine started (pid %d)", pid))
	if cg := e.cg; cg != nil {
		res.CgroupDirs = append(res.CgroupDirs, cg.MemDir)
		if cg.CPUDir != "" && cg.CPUDir != cg.MemDir {
			res.CgroupDirs = append(res.CgroupDirs, cg.CPUDir)
		}
	}
	e.exited = make(chan error, 1)
	go func() { e.exited <- cmd.Wait() }()
	if r.o.OnEngineStart != nil {
		r.o.OnEngineStart(pid, res.CgroupDirs)
	}
	if s.Serve != nil {
		e.client = startServeClient(context.Background(), s, res.StderrFile)
	}
	return nil
}

// monitor samples the engine and applies the pressure until it exits. It
// returns the engine's exit status, or an error when the run must stop
// (ctx cancelled, the pressure could not be applied); the engine is dead
// either way.
func (e *engineRun) monitor(ctx context.Context, m *monitor) (waitErr, err error) {
	tick := time.NewTicker(e.r.o.SampleEvery)
	defer tick.Stop()
	pid := e.cmd.Process.Pid
	var served <-chan struct{} // serve mode: the client is done, stop the server
	if e.client != nil {
		served = e.client.done
	}
	for {
		select {
		case waitErr = <-e.exited:
			e.waited = true
			e.event("engine exited")
			return waitErr, nil
		case <-served:
			served = nil
			e.event("requests done: server stopped with SIGINT")
			e.cmd.Process.Signal(os.Interrupt)
		case <-ctx.Done():
			e.kill()
			return nil, ctx.Err()
		case <-tick.C:
			if err := m.step(pid); err != nil {
				e.kill()
				return nil, err
			}
		}
	}
}

func (e *engineRun) kill() {
	e.cmd.Process.Kill()
	<-e.exited
	e.waited = true
}

// collect reads what the engine left: its last statistics, the hogs' and
// the cgroup's end state, the verdict and the quality against tier 0.
func (e *engineRun) collect(ctx context.Context, m *monitor, waitErr error) error {
	r, res := e.r, e.res
	if err := m.tail.Poll(m.onStats); err != nil {
		return err
	}
	m.stopHogs()
	m.stopCPUHogs()
	if cg := e.cg; cg != nil {
		if ev, err := cg.Events(); err == nil {
			res.OOMKills = ev.OOMKill
		}
		if st, err := cg.CPUStats(); err == nil && r.s.Thermal != nil {
			res.CPUPeriods, res.CPUThrottled, res.CPUThrottledMs = st.Periods, st.Throttled, float64(st.ThrottledTime.Microseconds())/1000
		}
	}
	r.outcome(res, waitErr, m)
	r.cpuPhases(res, m)
	if e.client != nil {
		res.Serve = e.client.stop()
		res.QualityError = "not measured in serve mode (the server writes no --logits-out)"
		return nil
	}
	if q, err := r.measureQuality(ctx, e.logitsPath, res); err != nil {
		res.QualityError = err.Error()
	} else {
		res.Quality = q
	}
	return nil
}

// close kills the engine if it still runs and releases its files, gate and
// cgroup (the cgroup's removal error is returned).
func (e *engineRun) close() error {
	if e.client != nil {
		e.client.stop()
	}
	if e.cmd != nil && !e.waited {
		e.kill()
	}
	for _, f := range []*os.File{e.gateW, e.stdout, e.stderr} {
		if f != nil {
			f.Close()
		}
	}
	if e.cg != nil {
		return e.cg.Close()
	}
	return nil
}

// gatePositions are the token counts at which pressure is scheduled (hogs
// and thermal steps with at_token), ascending: the engine waits at each
// until the monitor has applied it.
func (r *runner) gatePositions() []int {
	var at []int
	if m := r.s.Memory; m != nil {
		for _, h := range m.Hogs {
			if h.AtToken != nil && *h.AtToken > 0 {
				at = append(at, *h.AtToken)
			}
		}
	}
	if th := r.s.Thermal; th != nil {
		for _, st := range th.Schedule {
			if st.AtToken != nil && *st.AtToken > 0 {
				at = append(at, *st.AtToken)
			}
		}
	}
	if c := r.s.CPU; c != nil {
		at = append(at, c.positions(r.s.N)[1:]...)
	}
	slices.Sort(at)
	return slices.Compact(at)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
