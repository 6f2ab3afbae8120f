package main

import (
	"fmt"
	"io"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/cmd/edgellm/internal/bench"
	"github.com/edgellm/edgellm/host"
	"github.com/spf13/pflag"
)

// `edgellm bench --spec SPEC`: plain and speculative decoding in one
// process on the same prompt (native engine, greedy), repeats interleaved:
// tok/s of each and the ratio, acceptance, K, RSS/PSS and KV arena bytes,
// the measured costs (c, v(n)) and the analytic expectation
// (1 − α^(K+1)) / ((1 − α)(K·c + v(K+1))). --synth-from/--synth-agree make
// an acceptance-controlled SYNTHETIC pair for skip:N (benchspecmodel.go).

func addBenchSpecFlags(fs *pflag.FlagSet) {
	fs.String("spec", "", "measure speculative decoding with this draft against plain decoding (skip:N, self:TYPE, ngram or FILE.gguf)")
	fs.String("spec-k", "4", "with --spec: draft tokens per round (1-8) or auto")
	fs.StringSlice("layer-sets", nil, "with --spec self:TYPE: GGUF files of the model at other precisions")
	fs.Int("synth-from", 0, "with --synth-agree: SYNTHETIC pair, a copy of the model whose layers ≥ N add nothing (a skip:N draft matches it)")
	fs.Float32("synth-agree", 0, "with --synth-from: SIMULATED acceptance, the draft's proposal is kept at this share of positions (0 = off)")
	fs.Bool("spec-sweep", false, "with --spec: tokens per thread-CPU second at K = 0..8 and auto against the analytic expectation (--threads 1)")
}

type benchSpecOptions struct {
	Spec       string   `koanf:"spec"`
	SpecK      string   `koanf:"spec-k"`
	LayerSets  []string `koanf:"layer-sets"`
	SynthFrom  int      `koanf:"synth-from"`
	SynthAgree float32  `koanf:"synth-agree"`
	Sweep      bool     `koanf:"spec-sweep"`
}

// specSide is one measured side (plain or speculative) of one repeat.
type specSide struct {
	tps      float64
	rss, pss int64
	kvBytes  int64
	draftKV  int64
	toks     []int32
	st       host.DraftStats
	times    host.DraftStepTimes
	k        int
	spec     string // the draft's canonical spec
}

func runBenchSpec(c *cmdEnv, o benchOptions, so benchSpecOptions, path string, text []byte) error {
	k, auto, err := parseSpecK(c, so.SpecK)
	if err != nil {
		return err
	}
	threads := o.Threads
	eng, err := loadSpecModel(path, so, threads, o.Repack, o.Kernels)
	if err != nil {
		return err
	}
	defer eng.Close()
	if err := checkSpecDraft(eng, so, o.Ctx); err != nil {
		return err
	}
	p, err := bench.MakePrompt(eng.Vocab(), string(text), benchText, o.NPrompt)
	if err != nil {
		return err
	}
	mem, err := bench.NewMemSampler(0)
	if err != nil {
		return err
	}
	defer mem.Close()
	if so.Sweep {
		return runSpecSweep(c, eng, p.Tokens, o, so)
	}
	greedy := host.SamplingParams{TopP: 1, RepeatPenalty: 1}
	one := func(spec string, k int, auto bool) (specSide, error) {
		var r specSide
		s, err := eng.NewSession(host.SessionConfig{NCtx: o.Ctx, Threads: threads, Attention: o.attention()})
		if err != nil {
			return r, err
		}
		defer s.Close()
		sp, err := attachBenchDraft(eng, s, host.DraftOptions{Spec: spec, K: k, Auto: auto, Sampling: greedy})
		if err != nil {
			return r, err
		}
		defer sp.Close()
		tok, err := sp.Start(p.Tokens)
		if err != nil {
			return r, err
		}
		r.toks = append(r.toks, tok)
		t0 := time.Now()
		for len(r.toks) < o.NPredict {
			if err := c.Ctx.Err(); err != nil {
				return r, err
			}
			out, err := sp.Step()
			if err != nil {
				return r, err
			}
			r.toks = append(r.toks, out...)
		}
		dt := time.Since(t0)
		r.toks = r.toks[:o.NPredict]
		r.tps = float64(o.NPredict-1) / dt.Seconds()
		r.rss, r.pss = mem.Now()
		r.kvBytes, r.draftKV = sp.ArenaBytes(), sp.KVBytes()
		r.st, r.k, r.times, r.spec = sp.Stats(), sp.K(), sp.StepTimes(), sp.String()
		return r, nil
	}
	var plain, specs []specSide
	for i := range max(1, o.Repeats) {
		a, err := one("ngram", 0, false) // K = 0: plain steps through the same loop
		if err != nil {
			return err
		}
		b, err := one(so.Spec, k, auto)
		if err != nil {
			return err
		}
		c.Logf("repeat %d: plain %.1f tok/s, speculative %.1f tok/s", i+1, a.tps, b.tps)
		plain, specs = append(plain, a), append(specs, b)
	}
	printSpecBench(c.Stdout, so, plain, specs, o)
	return verifyCurve(c, eng, p.Tokens, o)
}

// verifyCurve measures v(n): the median time of a target batch of n = 1..9
// tokens (logits on every row, as a verify pass) at the prompt's context,
// divided by the median single-token step; 3 repeats per n, interleaved.
func verifyCurve(c *cmdEnv, eng host.Engine, prompt []int32, o benchOptions) error {
	s, err := eng.NewSession(host.SessionConfig{NCtx: o.Ctx, Threads: o.Threads, Attention: o.attention()})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Decode(prompt, host.LogitsLast); err != nil {
		return err
	}
	n0 := s.Len()
	batch := make([]int32, abi.MaxSpecK+1)
	for i := range batch {
		batch[i] = prompt[(i+1)%len(prompt)]
	}
	const reps = 3
	var times [abi.MaxSpecK + 1][]float64
	for range reps {
		for n := 1; n <= abi.MaxSpecK+1; n++ {
			if err := c.Ctx.Err(); err != nil {
				return err
			}
			t0 := time.Now()
			if err := s.Decode(batch[:n], host.LogitsAll); err != nil {
				return err
			}
			times[n-1] = append(times[n-1], time.Since(t0).Seconds())
			if err := s.Truncate(n0); err != nil {
				return err
			}
		}
	}
	one := bench.Median(times[0])
	fmt.Fprintf(c.Stdout, "verify cost curve v(n) (median of %d, ÷ one step of %.2f ms):", reps, one*1000)
	for n := range times {
		fmt.Fprintf(c.Stdout, " v(%d)=%.2f", n+1, bench.Median(times[n])/one)
	}
	fmt.Fprintln(c.Stdout)
	return nil
}

func medianTPS(xs []specSide) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = x.tps
	}
	return bench.Median(v)
}

func printSpecBench(w io.Writer, so benchSpecOptions, plain, specs []specSide, o benchOptions) {
	a, b := plain[len(plain)-1], specs[len(specs)-1]
	pt, st := medianTPS(plain), medianTPS(specs)
	same := firstDiff32(a.toks, b.toks)
	fmt.Fprintf(w, "draft %s, K %s (in force at the end: %d), %d threads, %d generated tokens, %d repeats (medians)\n",
		b.spec, so.SpecK, b.k, o.Threads, o.NPredict, len(specs))
	if so.SynthAgree != 0 {
		fmt.Fprintf(w, "SYNTHETIC pair: layers ≥ %d add nothing, SIMULATED agreement %g\n", so.SynthFrom, so.SynthAgree)
	}
	fmt.Fprintf(w, "plain:        %8.1f tok/s  RSS %.1f MiB  PSS %.1f MiB  KV arena %d bytes\n", pt, mib(a.rss), mib(a.pss), a.kvBytes)
	fmt.Fprintf(w, "speculative:  %8.1f tok/s  RSS %.1f MiB  PSS %.1f MiB  KV arena %d bytes (draft part %d, extra %d)\n",
		st, mib(b.rss), mib(b.pss), b.kvBytes, b.draftKV, b.kvBytes-a.kvBytes)
	fmt.Fprintf(w, "ratio %.3f; acceptance %.3f, mean accepted %.2f per round, %d rounds, %d plain steps\n",
		st/pt, b.st.Acceptance(), b.st.MeanAccepted(), b.st.Rounds, b.st.PlainSteps)
	if same < 0 {
		fmt.Fprintln(w, "greedy outputs identical: yes")
	} else {
		fmt.Fprintf(w, "greedy outputs identical: NO (first difference at token %d)\n", same)
	}
	// Costs relative to the plain side's step (same process, same prompt).
	unit := a.times.Verify[0].Seconds()
	if unit <= 0 {
		return
	}
	c := b.times.Draft.Seconds() / unit
	fmt.Fprintf(w, "measured costs (÷ plain step %.2f ms): draft step c = %.3f; verify v(n) =", unit*1000, c)
	for i, v := range b.times.Verify {
		if v > 0 {
			fmt.Fprintf(w, " v(%d)=%.3f", i+1, v.Seconds()/unit)
		}
	}
	fmt.Fprintln(w)
	if alpha := b.st.Acceptance(); b.k > 0 && b.times.Verify[b.k] > 0 {
		kk := float64(b.k)
		v := b.times.Verify[b.k].Seconds() / unit
		e := kk + 1 // α = 1
		if alpha < 1 {
			e = (1 - pow(alpha, b.k+1)) / (1 - alpha)
		}
		exp := e / (kk*c + v)
		fmt.Fprintf(w, "analytic expectation at α = %.3f, K = %d: %.3f× (measured %.3f×, %.2f of it)\n", alpha, b.k, exp, st/pt, st/pt/exp)
	}
}

func pow(x float64, n int) float64 {
	r := 1.0
	for range n {
		r *= x
	}
	return r
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func firstDiff32(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
