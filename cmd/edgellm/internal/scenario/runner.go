//go:build linux

package scenario

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/pressure"
	"github.com/edgellm/edgellm/cmd/edgellm/internal/runargs"
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
	// PolicyDir holds prebuilt builtin policies, DIR/<builtin>.wasm (a
	// device has no Go toolchain). "" = the source tree's
	// policies/<builtin>/<builtin>.wasm as `make policies` builds them.
	PolicyDir string
	// BuildPolicies builds builtin policies from the source tree with the
	// Go toolchain instead (ignored with PolicyDir).
	BuildPolicies bool
	// SampleEvery is how often the runner samples the engine (default 20 ms).
	SampleEvery time.Duration
	// OnEngineStart, if set, is called when an engine process has started
	// (tests use it to interrupt a run and check the cleanup).
	OnEngineStart func(pid int, cgroupDirs []string)
	// OnToken, if set, is called from the monitor as the engine's tokens
	// are seen (n tokens generated so far): tests use it to act on an
	// event rather than after a guessed delay.
	OnToken func(n int)
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
	if o.Simulate && s.CPU != nil {
		return nil, errors.New("scenario: --simulate does not apply to cpu pressure (its hogs are always real processes)")
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
	// Every policy's module first: a missing one fails before any model is
	// synthesized.
	wasms := make([]string, len(s.Policies))
	for i, p := range s.Policies {
		if wasms[i], err = preparePolicy(ctx, s, p, o, out); err != nil {
			return nil, err
		}
	}
	tiers, err := prepareTiers(ctx, s, out, o.Logf)
	if err != nil {
		return nil, err
	}
	mode := probe(s, o)
	o.Logf("scenario %s: pressure %s", s.Name, mode.desc)
	rep := &Report{Scenario: s.Name, File: s.File, Pressure: mode.desc, Simulated: !mode.real, Tiers: tiers,
		Prompt: s.Prompt, N: s.N, Threads: s.Threads, Ctx: s.Ctx, Engine: s.Engine, Memory: s.Memory, Thermal: s.Thermal, CPU: s.CPU}
	r := &runner{s: s, o: o, mode: mode, tiers: tiers}
	if r.sensors, err = r.sensorArgs(); err != nil {
		return nil, err
	}
	rep.Sensors = r.sensorsDesc
	repeats := max(1, s.Repeats)
	runs := make([][]PolicyResult, len(s.Policies))
	for k := range repeats {
		for j := range s.Policies {
			i := j
			if k%2 == 1 { // alternate the order: no contender always runs first
				i = len(s.Policies) - 1 - j
			}
			p, wasm := s.Policies[i], wasms[i]
			r.repeat = k
			o.Logf("scenario %s: policy %s (%s)%s", s.Name, p.Name, wasm, repeatNote(k, repeats))
			res, err := r.runPolicy(ctx, p, wasm)
			if err != nil {
				return nil, fmt.Errorf("scenario %s, policy %s: %w", s.Name, p.Name, err)
			}
			o.Logf("scenario %s: policy %s: %s, %d tokens, mean %.1f tok/s, %d tier swaps, %d policy failures, OOM kills %d, peak RSS %.1f MiB%s",
				s.Name, p.Name, res.Outcome, res.Tokens, res.MeanTPS, res.TierSwaps, res.PolicyFailures, res.OOMKills, res.PeakRSSMB, simNote(mode))
			runs[i] = append(runs[i], res)
		}
	}
	for _, rs := range runs {
		rep.Policies = append(rep.Policies, medianPhases(rs))
	}
	return rep, nil
}

func repeatNote(k, n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(", repeat %d of %d", k+1, n)
}

// medianPhases is a contender's result over its repeats: the first
// repeat's, with each CPU phase taken from the repeat whose tok/s there is
// the median (the lower middle one for an even count), and every repeat's
// phases kept in CPUPhaseRuns.
func medianPhases(rs []PolicyResult) PolicyResult {
	res := rs[0]
	if len(rs) == 1 {
		return res
	}
	for _, r := range rs {
		res.CPUPhaseRuns = append(res.CPUPhaseRuns, r.CPUPhases)
	}
	res.CPUPhases = nil
	for i := range rs[0].CPUPhases {
		var cands []CPUPhase
		for _, r := range rs {
			if i < len(r.CPUPhases) {
				cands = append(cands, r.CPUPhases[i])
			}
		}
		slices.SortFunc(cands, func(a, b CPUPhase) int { return cmp.Compare(a.TPS, b.TPS) })
		res.CPUPhases = append(res.CPUPhases, cands[(len(cands)-1)/2])
	}
	return res
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
	if s.CPU != nil {
		return probeCPU(s)
	}
	if o.Simulate {
		return pressureMode{desc: "SIMULATED (trace-only pressure: requested with --simulate)"}
	}
	v, dirs, err := CheckCgroups(s.Name+"-probe", s.Memory != nil, s.Thermal != nil)
	if err != nil {
		return pressureMode{desc: "SIMULATED (trace-only pressure: " + err.Error() + ")"}
	}
	return pressureMode{real: true, cgroup: v, desc: fmt.Sprintf("real (cgroup v%d: %s)", v, dirs)}
}

// CheckCgroups creates a cgroup named name and writes what the runner
// writes for real pressure: a memory limit (memory) and a CPU quota (cpu).
// It returns the cgroup version and where the cgroups live, or why real
// pressure is not possible here. Tests call it to know what Run will do.
func CheckCgroups(name string, memory, cpu bool) (version int, where string, err error) {
	cg, err := pressure.NewCgroup(name)
	if err != nil {
		return 0, "", err
	}
	defer cg.Close()
	if memory {
		if err := cg.SetMemoryLimit(64 << 20); err != nil {
			return 0, "", fmt.Errorf("cgroup memory limit refused: %w", err)
		}
	}
	if cpu {
		if err := cg.SetCPUQuota(0.5); err != nil {
			return 0, "", fmt.Errorf("cgroup CPU quota refused: %w", err)
		}
	}
	return cg.Version, fmt.Sprintf("memory %s, cpu %s", filepath.Dir(cg.MemDir), filepath.Dir(cg.CPUDir)), nil
}

type runner struct {
	s       *Spec
	o       Options
	mode    pressureMode
	tiers   []Tier
	sensors []string // engine arguments choosing its sensors
	// manifests are the calibrated manifests of per_layer contenders (by
	// text and rule), layers the tiers' per-layer bytes (spec_perlayer.go).
	manifests   map[string]string
	layers      *layerBytes
	sensorsDesc string
	repeat      int // the repeat running now (Spec.Repeats), for its output directory
}

// sensorArgs writes the trace the engine's policy reads, if any. Traces are
// indexed by decode step: --trace-step-ms 1 and t_ms = token index, so the
// status the policy sees at step n is the one scheduled for token n, the
// same token at which the runner changes the CPU quota.
func (r *runner) sensorArgs() ([]string, error) {
	s := r.s
	if s.CPU != nil {
		r.sensorsDesc = "live (CPU load: /proc/loadavg run queue, /proc/pressure/cpu, affinity ∩ cpuset; the engine's step times)"
		return runargs.SensorFlags("live", 20*time.Millisecond, 0), nil
	}
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
