package main

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/cmd/edgellm/internal/bench"
	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/cputime"
)

// `edgellm bench --spec SPEC --spec-sweep`: tokens per thread-CPU second
// against K = 0..8 and auto, in one process on one OS thread at one
// thread, beside the analytic expectation from the measured acceptance α,
// draft step cost c and verify cost curve v(n), all in the decoding
// thread's CPU time. At one thread ggml computes on the calling thread, so
// its CPU time is the compute a quiet core would spend (cache effects
// aside), whatever else the machine runs; wall time is not used.

// sweepRun is one generation at one K.
type sweepRun struct {
	cpu  time.Duration // thread CPU time of the Step loop
	toks []int32
	st   host.DraftStats
	k    int    // K in force at the end (auto: the last choice)
	spec string // the draft's canonical spec
}

// alpha is the per-token acceptance: accepted ÷ checked draft positions
// (positions after a rejection are drafted but not checked), the
// maximum-likelihood α of the geometric model behind the analytic rate.
func (r sweepRun) alpha() float64 {
	var acc, chk int
	for i := range r.st.DraftedAt {
		acc += r.st.AcceptedAt[i]
		chk += r.st.DraftedAt[i]
	}
	if chk == 0 {
		return 0
	}
	return float64(acc) / float64(chk)
}

func (r sweepRun) rate(n int) float64 { return float64(n-1) / r.cpu.Seconds() }

// sweepGen generates o.NPredict tokens greedily with K = k (auto: the
// Speculator's own choice), measuring with the thread CPU clock.
func sweepGen(eng host.Engine, spec string, prompt []int32, o benchOptions, k int, auto bool) (sweepRun, error) {
	var r sweepRun
	s, err := eng.NewSession(host.SessionConfig{NCtx: o.Ctx, Threads: 1, Attention: o.attention()})
	if err != nil {
		return r, err
	}
	defer s.Close()
	sp, err := attachBenchDraft(eng, s, host.DraftOptions{Spec: spec, K: k, Auto: auto,
		Sampling: host.SamplingParams{TopP: 1, RepeatPenalty: 1}, Clock: cputime.Thread})
	if err != nil {
		return r, err
	}
	defer sp.Close()
	tok, err := sp.Start(prompt)
	if err != nil {
		return r, err
	}
	r.toks = append(r.toks, tok)
	c0 := cputime.Thread()
	for len(r.toks) < o.NPredict {
		out, err := sp.Step()
		if err != nil {
			return r, err
		}
		r.toks = append(r.toks, out...)
	}
	r.cpu = cputime.Thread() - c0
	r.toks = r.toks[:o.NPredict]
	r.st, r.k, r.spec = sp.Stats(), sp.K(), sp.String()
	return r, nil
}

// verifyCurveCPU is v(n), n = 1..9: the median thread CPU time of a target
// batch of n tokens with logits on every row at the prompt's context,
// divided by n = 1's; reps repeats, interleaved, after one warm-up pass
// (first-touch page faults of the mapped weights count as CPU time). It also returns n = 1's
// median time, the unit of c.
func verifyCurveCPU(eng host.Engine, prompt []int32, o benchOptions, reps int) ([abi.MaxSpecK + 1]float64, time.Duration, error) {
	var v [abi.MaxSpecK + 1]float64
	s, err := eng.NewSession(host.SessionConfig{NCtx: o.Ctx, Threads: 1, Attention: o.attention()})
	if err != nil {
		return v, 0, err
	}
	defer s.Close()
	if err := s.Decode(prompt, host.LogitsLast); err != nil {
		return v, 0, err
	}
	n0 := s.Len()
	batch := make([]int32, abi.MaxSpecK+1)
	for i := range batch {
		batch[i] = prompt[(i+1)%len(prompt)]
	}
	var times [abi.MaxSpecK + 1][]float64
	for rep := range reps + 1 { // the first pass warms pages and graphs, not kept
		for n := 1; n <= abi.MaxSpecK+1; n++ {
			c0 := cputime.Thread()
			if err := s.Decode(batch[:n], host.LogitsAll); err != nil {
				return v, 0, err
			}
			if rep > 0 {
				times[n-1] = append(times[n-1], (cputime.Thread() - c0).Seconds())
			}
			if err := s.Truncate(n0); err != nil {
				return v, 0, err
			}
		}
	}
	one := bench.Median(times[0])
	for n := range times {
		v[n] = bench.Median(times[n]) / one
	}
	return v, time.Duration(one * float64(time.Second)), nil
}

// analyticRate is (1 − α^(K+1)) / ((1 − α)(K·c + v(K+1))) in units of the
// plain rate.
func analyticRate(alpha float64, k int, c float64, v [abi.MaxSpecK + 1]float64) float64 {
	if k == 0 {
		return 1
	}
	e := float64(k + 1)
	if alpha < 1 {
		e = (1 - pow(alpha, k+1)) / (1 - alpha)
	}
	return e / (float64(k)*c + v[k])
}

// runSpecSweep runs the sweep: per repeat, K = 0..8 then auto; the rate of
// each is the median over repeats, the CPU costs are pooled over all runs.
func runSpecSweep(c *cmdEnv, eng host.Engine, prompt []int32, o benchOptions, so benchSpecOptions) error {
	if o.Threads != 1 {
		return usagef("--spec-sweep measures the decoding thread's CPU time: it needs --threads 1 (got %d)", o.Threads)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	reps := max(1, o.Repeats)
	v, unit, err := verifyCurveCPU(eng, prompt, o, 3)
	if err != nil {
		return err
	}
	const nK = abi.MaxSpecK + 2 // K = 0..8 and auto (last)
	runs := make([][]sweepRun, nK)
	for rep := range reps {
		for i := range nK {
			if err := c.Ctx.Err(); err != nil {
				return err
			}
			k, auto := i, i == nK-1
			if auto {
				k = 0
			}
			r, err := sweepGen(eng, so.Spec, prompt, o, k, auto)
			if err != nil {
				return err
			}
			c.Logf("repeat %d, K %s: %.2f tok/CPU-s, α %.3f", rep+1, sweepK(i), r.rate(o.NPredict), r.alpha())
			runs[i] = append(runs[i], r)
		}
	}
	return printSpecSweep(c.Stdout, runs[0][0].spec, so, o, runs, v, unit)
}

// inRunCosts are one K's costs as its own runs measured them (pooled over
// the repeats, thread CPU time, ÷ one plain step): c per draft step, v per
// verify batch of K+1 (plain steps, rare at fixed K, counted as batches),
// and the share of the generation's CPU time spent outside draft steps and
// verify batches (sampling, acceptance, bookkeeping: the implementation's
// own cost).
type inRunCosts struct{ c, v, outside float64 }

func inRun(rs []sweepRun, k int, unit time.Duration) (inRunCosts, bool) {
	var draft, verify, cpu time.Duration
	var steps, batches int
	for _, r := range rs {
		draft += r.st.DraftTime
		verify += r.st.VerifyTime
		cpu += r.cpu
		steps += r.st.DraftSteps
		batches += r.st.Rounds + r.st.PlainSteps
	}
	if k == 0 || steps == 0 || batches == 0 || cpu <= 0 || unit <= 0 {
		return inRunCosts{}, false
	}
	u := unit.Seconds()
	return inRunCosts{c: draft.Seconds() / float64(steps) / u, v: verify.Seconds() / float64(batches) / u,
		outside: 1 - (draft+verify).Seconds()/cpu.Seconds()}, true
}

// plainStep is the mean verify time of one plain step over the K = 0
// runs (0 when they took none).
func plainStep(rs []sweepRun) time.Duration {
	var t time.Duration
	n := 0
	for _, r := range rs {
		t += r.st.VerifyTime
		n += r.st.PlainSteps + r.st.Rounds
	}
	if n == 0 {
		return 0
	}
	return t / time.Duration(n)
}

func sweepK(i int) string {
	if i == abi.MaxSpecK+1 {
		return "auto"
	}
	return fmt.Sprint(i)
}

func printSpecSweep(w io.Writer, spec string, so benchSpecOptions, o benchOptions, runs [][]sweepRun, v [abi.MaxSpecK + 1]float64, unit time.Duration) error {
	// c: draft CPU time per draft step, pooled over every run, ÷ one step.
	var dt time.Duration
	var ds int
	for _, rs := range runs {
		for _, r := range rs {
			dt += r.st.DraftTime
			ds += r.st.DraftSteps
		}
	}
	c := 0.0
	if ds > 0 {
		c = dt.Seconds() / float64(ds) / unit.Seconds()
	}
	fmt.Fprintf(w, "draft %s, 1 thread, %d generated tokens, %d repeats (median rate); rates in tokens per thread-CPU second (not wall time)\n",
		spec, o.NPredict, len(runs[0]))
	if so.SynthAgree != 0 {
		fmt.Fprintf(w, "SYNTHETIC pair: layers ≥ %d add nothing, SIMULATED agreement %g\n", so.SynthFrom, so.SynthAgree)
	}
	fmt.Fprintf(w, "CPU costs: one step %.2f ms; draft step c = %.3f; v(n) =", unit.Seconds()*1000, c)
	for _, x := range v {
		fmt.Fprintf(w, " %.3f", x)
	}
	fmt.Fprintln(w)
	rate := func(rs []sweepRun) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = r.rate(o.NPredict)
		}
		return bench.Median(xs)
	}
	base := rate(runs[0])
	ref := runs[0][0].toks
	// The in-run columns divide by the K = 0 runs' own step (their verify
	// time per plain step, same process and minute as every K), not by the
	// calibration's: a loaded minute then scales numerator and unit alike.
	runUnit := plainStep(runs[0])
	if runUnit <= 0 {
		runUnit = unit
	}
	fmt.Fprintf(w, "in-run unit: the K = 0 runs' own step %.2f ms (calibration's %.2f ms)\n", runUnit.Seconds()*1000, unit.Seconds()*1000)
	fmt.Fprintln(w, "K\ttok/CPU-s\tspeedup\tα\tanalytic\tmeasured/analytic\tidentical\tin-run c\tin-run v(K+1)\toutside draft+verify\tmeasured/analytic(in-run)")
	best, bestK := 0.0, 0
	for i, rs := range runs {
		r, a := rate(rs), rs[len(rs)-1].alpha()
		same := "yes"
		for _, x := range rs {
			if firstDiff32(ref, x.toks) >= 0 {
				same = "NO"
			}
		}
		if i == len(runs)-1 {
			fmt.Fprintf(w, "auto\t%.3f\t%.3f\t%.3f\t\t\t%s\t(K at the end %d; %.3f of the best fixed K = %d)\n",
				r, r/base, a, same, rs[len(rs)-1].k, r/best, bestK)
			continue
		}
		if r > best {
			best, bestK = r, i
		}
		an := analyticRate(a, i, c, v)
		fmt.Fprintf(w, "%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s", i, r, r/base, a, an, r/base/an, same)
		if ir, ok := inRun(rs, i, runUnit); ok {
			vr := v
			vr[i] = ir.v
			fmt.Fprintf(w, "\t%.3f\t%.3f\t%.1f%%\t%.3f", ir.c, ir.v, 100*ir.outside, r/base/analyticRate(a, i, ir.c, vr))
		}
		fmt.Fprintln(w)
	}
	return nil
}
