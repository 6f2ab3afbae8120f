package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/bench"
	"github.com/edgellm/edgellm/cmd/edgellm/internal/pressure"
	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/cputime"
)

// `edgellm bench --spin-sweep`: ggml's barrier with its unbounded spin
// against edgellm's bounded one (kernels/spinwait.c), in one process on one
// engine, the two alternating every repeat: prefill and decode tok/s, the
// process's CPU over wall during decode (every thread counted), and the
// barrier waits that reached the limit and slept. Run it quiet, then beside
// CPU hogs (--hogs N, `yes > /dev/null &`, or `taskset -c 0` with
// --threads 2) to see what oversubscription costs.

// spinLevel is one spin limit and what was measured at it.
type spinLevel struct {
	limit           time.Duration // 0: unbounded (ggml's own)
	prefill, decode []float64     // tok/s per repeat
	cores           []float64     // process CPU ÷ wall during decode
	bounded, sleeps []float64     // per decoded token
	waits           [4]float64    // barrier waits per token by waitClasses, summed over repeats
}

// waitClasses are the wait lengths bench prints (bench.SpinStats.Waits
// buckets are powers of two in µs).
var waitClasses = [4]string{"< 8 µs", "8–64 µs", "64–512 µs", "≥ 512 µs"}

func waitClass(bucket int) int {
	switch {
	case bucket < 3:
		return 0
	case bucket < 6:
		return 1
	case bucket < 9:
		return 2
	}
	return 3
}

func runSpinSweep(c *cmdEnv, path string, o benchOptions, text []byte) error {
	if o.Compare != "" {
		return usagef("--spin-sweep and --compare cannot be combined")
	}
	cpus := bench.AllowedCPUs()
	if o.Hogs < 0 || o.Hogs > len(cpus) {
		return usagef("--hogs %d: want 0 to the %d CPUs this process may use", o.Hogs, len(cpus))
	}
	name, repack := bench.ParseEngine(o.Engine)
	eng, err := host.Load(path, host.LoadOptions{Engine: name, Repack: o.Repack || repack})
	if err != nil {
		return err
	}
	defer eng.Close()
	p, err := bench.MakePrompt(eng.Vocab(), string(text), benchText, o.NPrompt)
	if err != nil {
		return err
	}
	threads := o.Threads
	if threads == 0 {
		threads = len(cpus)
	}
	bounded := host.BarrierSpinLimit() // EDGELLM_BARRIER_SPIN_US, else the default
	if bounded == 0 {
		bounded = host.DefaultBarrierSpinLimit
	}
	levels := []*spinLevel{{limit: 0}, {limit: bounded}}
	defer host.SetBarrierSpinLimit(host.BarrierSpinLimit())
	c.Logf("bench --spin-sweep: %s engine, %d threads, %d prompt + %d generated tokens, %d repeats; barrier spin unbounded (ggml) against %v then sleep",
		eng.Name(), threads, o.NPrompt, o.NPredict, o.Repeats, bounded)
	if threads == 1 {
		c.Logf("bench: with one thread ggml has no barrier to wait at; use --threads 2 or more")
	}
	if o.Hogs > 0 {
		hog, err := pressure.StartCPUHog(c.Ctx, cpus[:o.Hogs], nil)
		if err != nil {
			return err
		}
		defer hog.Stop()
		c.Logf("bench: CPU hog pid %d spinning on CPUs %v", hog.Pid(), hog.CPUs)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for rep := 0; rep < o.Repeats; rep++ {
		order := slices.Clone(levels)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, lv := range order {
			host.SetBarrierSpinLimit(lv.limit)
			if err := spinDecode(eng, p.Tokens, o, threads, lv); err != nil {
				return err
			}
			n := len(lv.decode) - 1
			c.Logf("repeat %d, spin %s: prefill %.1f tok/s, decode %.2f tok/s, %.2f cores busy, %.1f bounded waits per token",
				rep+1, spinName(lv.limit), lv.prefill[n], lv.decode[n], lv.cores[n], lv.bounded[n])
		}
	}
	printSpinSweep(c.Stdout, levels)
	return nil
}

func spinName(d time.Duration) string {
	if d == 0 {
		return "unbounded (ggml)"
	}
	return fmt.Sprintf("%v, then sleep", d)
}

// spinDecode prefills the prompt on a fresh session, then decodes
// o.NPredict tokens greedily (the first step untimed), and appends its
// measurements to lv.
func spinDecode(eng host.Engine, prompt []int32, o benchOptions, threads int, lv *spinLevel) error {
	s, err := eng.NewSession(host.SessionConfig{NCtx: o.Ctx, Threads: threads})
	if err != nil {
		return err
	}
	defer s.Close()
	t0 := time.Now()
	if err := s.Decode(prompt, host.LogitsLast); err != nil {
		return err
	}
	lv.prefill = append(lv.prefill, float64(len(prompt))/time.Since(t0).Seconds())
	next := greedyNext(eng, s)
	tok, err := next(len(prompt) - 1)
	if err != nil {
		return err
	}
	var w0 time.Time
	var c0 time.Duration
	var s0 bench.SpinStats
	for i := 0; i < o.NPredict; i++ {
		if i == 1 {
			w0, c0, s0 = time.Now(), cputime.Process(), bench.ReadSpinStats()
		}
		if err := s.Decode([]int32{tok}, host.LogitsLast); err != nil {
			return err
		}
		if tok, err = next(0); err != nil {
			return err
		}
	}
	wall, cpu, s1 := time.Since(w0), cputime.Process()-c0, bench.ReadSpinStats()
	n := float64(o.NPredict - 1)
	lv.decode = append(lv.decode, n/wall.Seconds())
	lv.cores = append(lv.cores, cpu.Seconds()/wall.Seconds())
	lv.bounded = append(lv.bounded, float64(s1.Bounded-s0.Bounded)/n)
	lv.sleeps = append(lv.sleeps, float64(s1.Sleeps-s0.Sleeps)/n)
	for b := range s1.Waits {
		lv.waits[waitClass(b)] += float64(s1.Waits[b]-s0.Waits[b]) / n
	}
	return nil
}

func printSpinSweep(w io.Writer, levels []*spinLevel) {
	base := levels[0]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "barrier spin\tprefill tok/s (med)\tdecode tok/s (min/med/max)\tcores busy (med)\tbounded waits / sleeps per token\t÷ unbounded: decode, prefill, decode per CPU-s")
	for _, lv := range levels {
		perCPU := bench.Median(lv.decode) / bench.Median(lv.cores)
		basePerCPU := bench.Median(base.decode) / bench.Median(base.cores)
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f / %.2f / %.2f\t%.2f\t%.1f / %.1f\t%.3f, %.3f, %.3f\n", spinName(lv.limit),
			bench.Median(lv.prefill), slices.Min(lv.decode), bench.Median(lv.decode), slices.Max(lv.decode),
			bench.Median(lv.cores), bench.Median(lv.bounded), bench.Median(lv.sleeps),
			bench.Median(lv.decode)/bench.Median(base.decode), bench.Median(lv.prefill)/bench.Median(base.prefill), perCPU/basePerCPU)
	}
	tw.Flush()
	for _, lv := range levels {
		var parts []string
		for i, name := range waitClasses {
			parts = append(parts, fmt.Sprintf("%s %.1f", name, lv.waits[i]/float64(len(lv.decode))))
		}
		fmt.Fprintf(w, "barrier waits per token, %s: %s\n", spinName(lv.limit), strings.Join(parts, ", "))
	}
	for _, lv := range levels {
		if rel := (slices.Max(lv.decode) - slices.Min(lv.decode)) / bench.Median(lv.decode); len(lv.decode) > 1 && rel > bench.SpreadLimit {
			fmt.Fprintf(w, "warning: spin %s: decode tok/s repeats disagree by %.0f%% (limit %.0f%%): the machine was likely busy\n",
				spinName(lv.limit), 100*rel, 100*bench.SpreadLimit)
		}
	}
}
