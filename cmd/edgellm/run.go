package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/logitlog"
	"github.com/edgellm/edgellm/kernels"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{
		Name:    "run",
		Summary: "generate text: tokens to stdout, prefill/decode tok/s to stderr",
		Usage:   "[-m MODEL] [-p PROMPT] [-n N]",
		Flags: func(fs *pflag.FlagSet) {
			addModelFlag(fs)
			fs.StringP("prompt", "p", "", "prompt text (default: start from BOS)")
			fs.IntP("n-predict", "n", 128, "tokens to generate")
			addSamplingFlags(fs)
			addThreadsFlag(fs)
			addCtxFlag(fs)
			addKVTypeFlag(fs)
			addAttentionFlag(fs)
			addEngineFlag(fs)
			addTierFlags(fs)
			fs.StringSlice("swap-at", nil, "swap tiers after these generated token counts (with --tiers)")
			fs.StringSlice("swap-to", nil, "tier index to swap to at each --swap-at")
			addPolicyFlags(fs)
			addRunStatsFlags(fs)
			addGateFlags(fs)
			addWindowFlags(fs)
			addLayerSetFlags(fs)
			addVerboseFlag(fs)
		},
		Run: runRun,
	})
}

func addSamplingFlags(fs *pflag.FlagSet) {
	d := host.DefaultSampling()
	fs.Float32("temp", d.Temp, "temperature (0 = greedy)")
	addSeedFlag(fs)
	fs.Int("top-k", d.TopK, "top-k (0 = off)")
	fs.Float32("top-p", d.TopP, "top-p (1 = off)")
	fs.Float32("min-p", d.MinP, "min-p (0 = off)")
	fs.Float32("repeat-penalty", d.RepeatPenalty, "repetition penalty (1 = off)")
	fs.Int("repeat-last-n", d.RepeatLastN, "tokens considered by the repetition penalty")
}

func addTierFlags(fs *pflag.FlagSet) {
	fs.StringSlice("tiers", nil, "tier ladder: GGUF files of one model, high to low precision (comma-separated)")
	fs.Int("tier", 0, "tier of the ladder to start on")
}

func addVerboseFlag(fs *pflag.FlagSet) {
	fs.BoolP("verbose", "v", false, "show llama.cpp/ggml log output")
}

type samplingOptions struct {
	Temp          float32 `koanf:"temp"`
	Seed          int64   `koanf:"seed"`
	TopK          int     `koanf:"top-k"`
	TopP          float32 `koanf:"top-p"`
	MinP          float32 `koanf:"min-p"`
	RepeatPenalty float32 `koanf:"repeat-penalty"`
	RepeatLastN   int     `koanf:"repeat-last-n"`
}

func (o samplingOptions) params() host.SamplingParams {
	return host.SamplingParams{Temp: o.Temp, TopK: o.TopK, TopP: o.TopP, MinP: o.MinP,
		RepeatPenalty: o.RepeatPenalty, RepeatLastN: o.RepeatLastN, Seed: uint64(o.Seed)}
}

type runOptions struct {
	Model           string   `koanf:"model"`
	Prompt          string   `koanf:"prompt"`
	NPredict        int      `koanf:"n-predict"`
	Threads         int      `koanf:"threads"`
	Ctx             int      `koanf:"ctx"`
	KVType          string   `koanf:"kv-type"`
	Attention       string   `koanf:"attention"`
	Engine          string   `koanf:"engine"`
	Tiers           []string `koanf:"tiers"`
	Tier            int      `koanf:"tier"`
	SwapAt          []string `koanf:"swap-at"`
	SwapTo          []string `koanf:"swap-to"`
	Verbose         bool     `koanf:"verbose"`
	samplingOptions `koanf:",squash"`
	policyOptions   `koanf:",squash"`
	runStatsOptions `koanf:",squash"`
	gateOptions     `koanf:",squash"`
	windowOptions   `koanf:",squash"`
	layerSetOptions `koanf:",squash"`
}

// swapPlan is when to swap to which tier: swap at[i] generated tokens → to[i].
type swapPlan struct{ at, to []int }

func parseSwapPlan(at, to []string, nTiers int) (swapPlan, error) {
	var p swapPlan
	if len(at) != len(to) {
		return p, usagef("--swap-at has %d values but --swap-to has %d", len(at), len(to))
	}
	if len(at) > 0 && nTiers == 0 {
		return p, usagef("--swap-at needs --tiers")
	}
	prev := 0
	for i := range at {
		a, err := strconv.Atoi(strings.TrimSpace(at[i]))
		if err != nil || a <= prev {
			return p, usagef("--swap-at %q: want increasing positive token counts", at[i])
		}
		t, err := strconv.Atoi(strings.TrimSpace(to[i]))
		if err != nil || t < 0 || t >= nTiers {
			return p, usagef("--swap-to %q: want a tier index in 0..%d", to[i], nTiers-1)
		}
		prev = a
		p.at, p.to = append(p.at, a), append(p.to, t)
	}
	return p, nil
}

// setupLogs shows only llama.cpp errors unless --verbose.
func setupLogs(c *cmdEnv, verbose bool) {
	kernels.SetLogWriter(c.Stderr)
	if verbose {
		kernels.SetLogLevel(kernels.LogDebug)
	} else {
		kernels.SetLogLevel(kernels.LogError)
	}
}

func runRun(c *cmdEnv, args []string) error {
	var o runOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) > 0 {
		return usagef("unexpected argument %q (the prompt goes in -p)", args[0])
	}
	if o.NPredict < 0 {
		return usagef("-n %d: want ≥ 0", o.NPredict)
	}
	kv, err := host.ParseKVType(o.KVType)
	if err != nil {
		return usagef("--kv-type: %v", err)
	}
	att, err := host.ParseAttention(o.Attention)
	if err != nil {
		return usagef("--attention: %v", err)
	}
	sp := o.params()
	if err := sp.Validate(); err != nil {
		return usagef("%v", err)
	}
	plan, err := parseSwapPlan(o.SwapAt, o.SwapTo, len(o.Tiers))
	if err != nil {
		return err
	}
	setupLogs(c, o.Verbose)

	path, label := "", ""
	if len(o.Tiers) == 0 {
		if path, label, err = resolveModel(c, o.Model); err != nil {
			return err
		}
	} else {
		label = strings.Join(o.Tiers, ",") + fmt.Sprintf(" (tier ladder, starting on tier %d)", o.Tier)
	}
	eng, err := host.Load(path, host.LoadOptions{Engine: o.Engine, Tiers: o.Tiers, StartTier: o.Tier, NoMmap: o.NoMmap, LayerSets: o.LayerSets, Notices: c.Stderr})
	if err != nil {
		return err
	}
	defer eng.Close()
	info := eng.Info()
	if o.Ctx, err = fitCtx(c, o.Ctx, info.NCtxTrain); err != nil {
		return err
	}
	c.Logf("model: %s [%s, %s, %d layers, engine %s]", label, info.Arch, info.FileType, info.NLayer, eng.Name())
	if d := describeLayerSets(eng); d != "" {
		c.Logf("%s", d)
	}

	sess, err := eng.NewSession(host.SessionConfig{NCtx: o.Ctx, Threads: o.Threads, KVType: kv, Attention: att})
	if err != nil {
		return err
	}
	defer sess.Close()
	if err := applyWindow(c, o.windowOptions, eng, sess, o.Ctx, o.policyOptions.enabled()); err != nil {
		return err
	}

	vocab := eng.Vocab()
	var prompt []int32
	if o.Prompt == "" {
		prompt = []int32{vocab.BOS()}
	} else if prompt, err = vocab.Tokenize(o.Prompt, true); err != nil {
		return fmt.Errorf("tokenize prompt: %w", err)
	}
	o.NPredict = fitNPredict(c, o.NPredict, len(prompt), o.Ctx)
	if len(prompt)+o.NPredict > o.Ctx {
		return usagef("prompt of %d tokens + %d to generate exceed --ctx %d", len(prompt), o.NPredict, o.Ctx)
	}

	out := bufio.NewWriter(c.Stdout)
	defer out.Flush()
	if o.Prompt != "" {
		fmt.Fprint(out, o.Prompt)
	}
	gate, err := openGate(o.gateOptions)
	if err != nil {
		return err
	}
	defer gate.Close()
	rs, err := openRunStats(o.StatsJSON, eng)
	if err != nil {
		return err
	}
	defer rs.Close()
	var ll *logitlog.Writer
	if o.LogitsOut != "" {
		if ll, err = logitlog.Create(o.LogitsOut, vocab.NVocab(), prompt); err != nil {
			rs.Remove()
			return fmt.Errorf("--logits-out: %w", err)
		}
		defer ll.Close()
	}
	// Until generation starts, a failure (a policy that does not load, say)
	// leaves no output file behind; from then on they are the run's record.
	started := false
	defer func() {
		if !started {
			rs.Remove()
			if ll != nil {
				ll.Close()
				os.Remove(o.LogitsOut)
			}
		}
	}()
	var piece []byte
	first, nTok := true, 0
	emit := func(tok int32) error {
		piece = vocab.Piece(piece[:0], tok)
		if first && o.Prompt == "" && len(piece) > 0 && piece[0] == ' ' {
			piece = piece[1:] // SentencePiece's space prefix at the start of text
		}
		first = false
		out.Write(piece)
		rs.token(nTok)
		nTok++
		if ll != nil {
			if err := ll.Token(tok); err != nil {
				return fmt.Errorf("--logits-out: %w", err)
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
		return gate.pass(nTok)
	}

	opts := host.GenerateOptions{NPredict: o.NPredict, Sampling: sp, StopAtEOG: true}
	if ll != nil {
		opts.OnLogits = func(_ int, l []float32) error { return ll.Logits(l) }
	}
	var adapter *host.Adapter
	if o.policyOptions.enabled() {
		if len(plan.at) > 0 {
			return usagef("--policy and --swap-at both choose tiers: use one")
		}
		a, cleanup, err := startPolicy(c, o.policyOptions, eng, sess, o.Ctx, o.Threads, kv)
		if err != nil {
			return err
		}
		defer cleanup()
		adapter = a
		opts.BeforeStep = a.BeforeStep
		if gate != nil {
			gate.refresh = a.RefreshSensors
		}
	}
	if len(plan.at) > 0 {
		swapper, ok := sess.(host.TierSwapper)
		if !ok {
			return fmt.Errorf("engine %s cannot swap tiers", eng.Name())
		}
		next := 0
		opts.BeforeStep = func(step int) error {
			if next >= len(plan.at) || step != plan.at[next] {
				return nil
			}
			to := plan.to[next]
			next++
			t, err := swapper.SwapTier(to)
			if err != nil {
				return err
			}
			c.Logf("\n[swap %d→%d at token %d: state %.1f KiB, serialize %s, unload %s, load %s, restore %s, total %s]",
				t.From, t.To, step, float64(t.StateBytes)/1024, ms(t.Serialize), ms(t.Unload), ms(t.Load), ms(t.Restore), ms(t.Total()))
			return nil
		}
	}
	started = true
	rs.begin(len(prompt), adapter)
	st, err := host.Generate(c.Ctx, sess, vocab, prompt, opts, emit)
	rs.end(st, err)
	if cerr := ll.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("--logits-out: %w", cerr)
	}
	fmt.Fprintln(out)
	out.Flush()
	if err != nil {
		return err
	}
	c.Logf("prefill: %d tokens in %s (%.1f tok/s); decode: %d tokens, %.1f tok/s steady state (first step excluded)%s",
		st.PromptTokens, ms(st.Prefill), st.PrefillTPS(), st.GeneratedTokens, st.DecodeTPS(), eogNote(st))
	if adapter != nil {
		c.Logf("policy: %d calls, %d changes, %d tier swaps, %d failures, %s in policy calls",
			adapter.Calls, adapter.Changes, adapter.Swaps, adapter.Failures, ms(adapter.PolicyTime))
	}
	return nil
}

func eogNote(st host.Stats) string {
	if st.StoppedAtEOG {
		return "; stopped at end of generation"
	}
	return ""
}
