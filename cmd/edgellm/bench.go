package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/bench"
	"github.com/edgellm/edgellm/host"
)

func init() {
	register(&command{
		Name:    "bench",
		Summary: "measure prefill/decode tok/s, load time and peak RSS/PSS; --compare two engines; --swap tier swap latency",
		Usage:   "[-m MODEL] [-p N] [-n N] [-r N] [--compare ENGINE] | --swap --tiers A,B",
		Flags: func(fs *pflag.FlagSet) {
			addModelFlag(fs)
			fs.IntP("n-prompt", "p", 128, "synthetic prompt tokens, prefilled as one batch")
			fs.IntP("n-predict", "n", 128, "tokens to generate")
			fs.IntP("repeats", "r", 3, "repeats (fresh session each); medians are reported")
			addThreadsFlag(fs)
			addCtxFlag(fs)
			addKVTypeFlag(fs)
			addAttentionFlag(fs)
			addEngineFlag(fs)
			addWindowFlags(fs)
			fs.String("compare", "", "second engine (or two, comma-separated: a third column), measured in the same process with repeats interleaved; reports --engine/--compare ratios")
			addKernelsFlag(fs)
			fs.Bool("swap", false, "measure tier swap latency with KV migration instead (needs --tiers A,B)")
			fs.StringSlice("tiers", nil, "tier ladder: GGUF files of one model, high to low precision (comma-separated)")
			fs.Int("ctx-tokens", 512, "with --swap: tokens of context prefilled before swapping")
			fs.Bool("repack", false, "repack eligible weights (Q4_0, IQ4_NL, Q4_K) into ggml's interleaved layouts on every engine measured: faster, but anonymous memory; an engine named ENGINE:repack (--engine native:repack --compare native) is repacked alone")
			fs.Bool("repack-sweep", false, "native engine, repacked weights: decode tok/s with none, half and all of the layers repacked, switched live in one process (release and repack-again times, MiB, RSS); with --kernels edgellm the Q4_0 matrices' repacked layout is edgellm's q4x4")
			fs.Bool("spin-sweep", false, "ggml's thread barrier with its unbounded spin against edgellm's bounded spin (then sleep), alternating in one process: prefill and decode tok/s, process cores busy; run beside CPU hogs to see oversubscription's cost")
			fs.Int("hogs", 0, "with --spin-sweep: run this many CPU hogs (a process spinning one thread pinned to each of the first N allowed CPUs) during the sweep")
			fs.Bool("activations", false, "native engine: activation memory of a -p token prefill and of a decode step after it, ggml's graph allocator against keeping every intermediate tensor (no decoding)")
			fs.Bool("frag", false, "with --activations: decode -p + -n positions with the KV window changed every eighth of them and report each graph's ggml allocator bytes ÷ peak live bytes (fragmentation)")
			fs.Bool("warm-start", false, "native engine: time to first token and peak RSS of whole run processes from a cold page cache, per --willneed-layers value (none, 2, 3, all), -r repeats in turn")
			fs.Bool("kernels-vn", false, "native engine: forward time of a batch of n = 1..8 tokens (logits on every row) with ggml's kernels, edgellm's (and with --repack both repacked), interleaved in one process: v(n), weight GB/s, % of the memory bandwidth measured in the same run, ggml ÷ this")
			fs.Bool("bandwidth", false, "also measure the machine's memory read bandwidth (1..--threads readers) and print decode's weight GB/s per token against it")
			addJSONFlag(fs)
			addBenchSpecFlags(fs)
			addVerboseFlag(fs)
		},
		Run: runBench,
	})
}

type benchOptions struct {
	Model            string   `koanf:"model"`
	NPrompt          int      `koanf:"n-prompt"`
	NPredict         int      `koanf:"n-predict"`
	Repeats          int      `koanf:"repeats"`
	Threads          int      `koanf:"threads"`
	Ctx              int      `koanf:"ctx"`
	KVType           string   `koanf:"kv-type"`
	Attention        string   `koanf:"attention"`
	Engine           string   `koanf:"engine"`
	Compare          string   `koanf:"compare"`
	Swap             bool     `koanf:"swap"`
	Tiers            []string `koanf:"tiers"`
	CtxTokens        int      `koanf:"ctx-tokens"`
	Repack           bool     `koanf:"repack"`
	Kernels          string   `koanf:"kernels"`
	Bandwidth        bool     `koanf:"bandwidth"`
	KernelsVn        bool     `koanf:"kernels-vn"`
	RepackSweep      bool     `koanf:"repack-sweep"`
	SpinSweep        bool     `koanf:"spin-sweep"`
	Activations      bool     `koanf:"activations"`
	Frag             bool     `koanf:"frag"`
	WarmStart        bool     `koanf:"warm-start"`
	Hogs             int      `koanf:"hogs"`
	JSON             bool     `koanf:"json"`
	Verbose          bool     `koanf:"verbose"`
	benchSpecOptions `koanf:",squash"`
	windowOptions    `koanf:",squash"`
}

// benchText is the prompt text: tokenized and repeated to the prompt length.
const benchText = "text/stories.txt"

func validEngine(flag, e string) error {
	name, _ := bench.ParseEngine(e)
	switch name {
	case "auto", "native", "llamacpp":
		return nil
	}
	return usagef("%s %q: want auto, native or llamacpp, optionally with %s and (native) %s", flag, e, bench.RepackSuffix, bench.KernelsSuffix)
}

// check validates the flags that do not need the model.
// attention is --attention, already validated by runBench (auto if not).
func (o *benchOptions) attention() host.Attention {
	a, _ := host.ParseAttention(o.Attention)
	return a
}

func (o *benchOptions) check(args []string) (host.KVType, error) {
	if len(args) > 0 {
		return "", usagef("unexpected argument %q (the model goes in -m)", args[0])
	}
	kv, err := host.ParseKVType(o.KVType)
	if err != nil {
		return "", usagef("--kv-type: %v", err)
	}
	switch {
	case o.Repeats < 1:
		return "", usagef("-r %d: want ≥ 1", o.Repeats)
	case o.Threads < 0:
		return "", usagef("--threads %d: want ≥ 0 (0 = all cores)", o.Threads)
	case o.Ctx < 1:
		return "", usagef("--ctx %d: want ≥ 1", o.Ctx)
	}
	if err := validEngine("--engine", o.Engine); err != nil {
		return "", err
	}
	if o.Swap {
		switch {
		case o.Compare != "":
			return "", usagef("--swap and --compare cannot be combined")
		case len(o.Tiers) != 2:
			return "", usagef("--swap needs --tiers A,B (two GGUF files of one model), got %d", len(o.Tiers))
		case o.Engine == "native":
			return "", usagef("--swap measures KV migration on the llamacpp engine; the native engine switches precision in place")
		case o.CtxTokens < 1:
			return "", usagef("--ctx-tokens %d: want ≥ 1", o.CtxTokens)
		}
		for _, t := range o.Tiers {
			if _, err := os.Stat(t); err != nil {
				return "", fmt.Errorf("tier %s: %w", t, errNotFound(err))
			}
		}
		return kv, nil
	}
	switch {
	case len(o.Tiers) > 0:
		return "", usagef("--tiers is for --swap")
	case o.NPrompt < 1:
		return "", usagef("-p %d: want ≥ 1", o.NPrompt)
	case o.NPredict < 3:
		return "", usagef("-n %d: want ≥ 3 (the first decode step is untimed warm-up)", o.NPredict)
	}
	if o.Compare != "" {
		for _, e := range strings.Split(o.Compare, ",") {
			if err := validEngine("--compare", e); err != nil {
				return "", err
			}
		}
	}
	switch o.Kernels {
	case "", "ggml", "edgellm":
	default:
		return "", usagef("--kernels %q: want ggml or edgellm", o.Kernels)
	}
	return kv, nil
}

func runBench(c *cmdEnv, args []string) error {
	var o benchOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	kv, err := o.check(args)
	if err != nil {
		return err
	}
	att, err := host.ParseAttention(o.Attention)
	if err != nil {
		return usagef("--attention: %v", err)
	}
	host.SetLog(c.Stderr, logLevel(o.Verbose))
	var text []byte
	if p := findShared(benchText); p != "" {
		if text, err = os.ReadFile(p); err != nil {
			return err
		}
	} else {
		c.Logf("bench: %s not found; the prompt is synthetic token ids", benchText)
	}

	if o.Swap {
		if err := o.fitSwap(c); err != nil {
			return err
		}
		r, err := bench.Swap(c.Ctx, bench.SwapOptions{Tiers: o.Tiers, NCtxTokens: o.CtxTokens, Repeats: o.Repeats,
			Threads: o.Threads, NCtx: o.Ctx, KVType: kv, Repack: o.Repack,
			Text: string(text), TextName: benchText, Progress: c.Stderr})
		if err != nil {
			return benchErr(err)
		}
		if o.JSON {
			return writeJSON(c.Stdout, r)
		}
		printSwap(c.Stdout, r)
		return nil
	}

	path, label, err := resolveModel(c, o.Model)
	if err != nil {
		return err
	}
	if !o.Activations && !o.WarmStart {
		train, err := modelTrainCtx(path)
		if err != nil {
			return err
		}
		lim, err := modelLimit(train).withDraft(o.Spec)
		if err != nil {
			return err
		}
		if o.Ctx, err = fitCtx(c, o.Ctx, lim); err != nil {
			return err
		}
		if err := fitLengths(c, o.Ctx, length{"n-prompt", "-p", &o.NPrompt}, length{"n-predict", "-n", &o.NPredict}); err != nil {
			return err
		}
		if o.NPredict < 3 {
			return usagef("-n %d: want ≥ 3 (the first decode step is untimed warm-up); the context %d leaves too little", o.NPredict, o.Ctx)
		}
	}
	if (o.windowOptions.set() || o.Evict != "drop") && (o.Activations || o.WarmStart || o.RepackSweep || o.SpinSweep || o.Spec != "") {
		return usagef("--window, --anchors, --layer-windows and --evict are for the throughput bench (not --activations, --warm-start, --repack-sweep, --spin-sweep or --spec)")
	}
	if o.Frag && !o.Activations {
		return usagef("--frag is for --activations")
	}
	if o.Activations && o.Frag {
		return runFrag(c, path, label, o)
	}
	if o.Activations {
		return runActivations(c, path, label, o)
	}
	if o.WarmStart {
		return runWarmStart(c, path, label, o)
	}
	if o.RepackSweep {
		if o.Spec != "" {
			return usagef("--repack-sweep and --spec cannot be combined")
		}
		return runRepackSweep(c, path, o, text)
	}
	if o.Hogs != 0 && !o.SpinSweep {
		return usagef("--hogs is for --spin-sweep")
	}
	if o.SpinSweep {
		if o.Spec != "" || o.RepackSweep {
			return usagef("--spin-sweep cannot be combined with --spec or --repack-sweep")
		}
		return runSpinSweep(c, path, o, text)
	}
	if o.KernelsVn {
		return runKernelsVn(c, path, o)
	}
	if o.Spec != "" {
		return runBenchSpec(c, o, o.benchSpecOptions, path, text)
	}
	bo := bench.Options{Engine: o.Engine, NPrompt: o.NPrompt, NGen: o.NPredict, Repeats: o.Repeats,
		Threads: o.Threads, NCtx: o.Ctx, KVType: kv, Attention: att, Repack: o.Repack, Kernels: o.Kernels,
		Text: string(text), TextName: benchText, Progress: c.Stderr}
	if o.windowOptions.set() || o.Evict != "drop" {
		bo.Setup = func(eng host.Engine, sess host.Session) error {
			return applyWindow(c, o.windowOptions, eng, sess, o.Ctx, false)
		}
	}
	c.Logf("bench: %s, %d prompt + %d generated tokens, %d repeats", label, o.NPrompt, o.NPredict, o.Repeats)
	roofline := func(...*bench.Result) {}
	if o.Bandwidth && !o.JSON {
		bw := machineBandwidth(c.Stdout, o.Threads)
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		roofline = func(rs ...*bench.Result) { printRoofline(c.Stdout, st.Size(), bw, rs...) }
	}
	if o.Compare != "" {
		r, err := bench.CompareAll(c.Ctx, path, o.Engine, strings.Split(o.Compare, ","), bo)
		if err != nil {
			return benchErr(err)
		}
		if o.JSON {
			return writeJSON(c.Stdout, r)
		}
		rs := []*bench.Result{r.A, r.B}
		if r.C != nil {
			rs = append(rs, r.C)
		}
		printResults(c.Stdout, rs...)
		roofline(rs...)
		fmt.Fprintf(c.Stdout, "ratio A/B: prefill %.3f  decode %.3f   (process peak with all loaded: RSS %.1f MiB, PSS %.1f MiB)\n",
			r.PrefillRatio, r.DecodeRatio, r.RSSPeakMB, r.PSSPeakMB)
		fmt.Fprintf(c.Stdout, "ratio A/B over thread CPU time: prefill %.3f  decode %.3f   (robust to a busy machine with --threads 1)\n",
			r.PrefillCPURatio, r.DecodeCPURatio)
		if r.C != nil {
			fmt.Fprintf(c.Stdout, "ratio A/C: prefill %.3f  decode %.3f; over thread CPU time: prefill %.3f  decode %.3f\n",
				r.PrefillRatioC, r.DecodeRatioC, r.PrefillCPURatioC, r.DecodeCPURatioC)
		}
		return nil
	}
	r, err := bench.Run(c.Ctx, path, bo)
	if err != nil {
		return benchErr(err)
	}
	if o.JSON {
		return writeJSON(c.Stdout, r)
	}
	printResults(c.Stdout, r)
	roofline(r)
	return nil
}

// benchErr turns a context misfit found after loading into a usage error.
func benchErr(err error) error {
	if errors.Is(err, bench.ErrContext) {
		return usagef("%v", err)
	}
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printResults(w io.Writer, rs ...*bench.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "engine\tthreads\tkv\tn_prompt\tn_gen\tprefill tok/s\tdecode tok/s\tload ms\trss peak MiB\tpss peak MiB\trepacked MiB\t")
	for _, r := range rs {
		rss, pss := "-", "-" // Compare reports the process peak once, below
		if r.RSSPeakMB > 0 {
			rss, pss = fmt.Sprintf("%.1f", r.RSSPeakMB), fmt.Sprintf("%.1f", r.PSSPeakMB)
		}
		rp := "-"
		if r.Repack || r.RepackMB > 0 { // > 0: edgellm's q4x4 copy (--kernels edgellm)
			rp = fmt.Sprintf("%.1f", r.RepackMB)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t\n",
			r.Engine, r.Threads, r.KVType, r.NPrompt, r.NGen, r.PrefillTPS, r.DecodeTPS, r.LoadMS, rss, pss, rp)
	}
	tw.Flush()
	if len(rs) > 0 {
		fmt.Fprintf(w, "model %s; medians of %d repeats; prompt: %s\n", rs[0].Model, rs[0].Repeats, rs[0].PromptSource)
		for _, r := range rs {
			if r.KVEvict != "" && r.KVEvict != "drop" {
				fmt.Fprintf(w, "%s: KV window eviction %s\n", r.Engine, r.KVEvict)
			}
		}
	}
	printHonesty(w, rs...)
}

func printSwap(w io.Writer, r *bench.SwapResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ctx tokens\tstate KiB\tswap ms (median)\tdown ms\tup ms\tserialize\tunload\tload\trestore\t")
	fmt.Fprintf(tw, "%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", r.NCtxTokens, float64(r.StateBytes)/1024,
		r.SwapMSMedian, r.DownMSMedian, r.UpMSMedian, r.SerializeMS, r.UnloadMS, r.LoadMS, r.RestoreMS)
	tw.Flush()
	fmt.Fprintf(w, "tiers %s; %d swaps (%d round trips), threads %d, KV %s; peak RSS %.1f MiB, PSS %.1f MiB\n",
		strings.Join(r.Tiers, " ⇄ "), len(r.Swaps), r.Repeats, r.Threads, r.KVType, r.RSSPeakMB, r.PSSPeakMB)
}
