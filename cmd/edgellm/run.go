package main

import (
	"strconv"
	"strings"

	"github.com/edgellm/edgellm/host"
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
			addSpecFlags(fs)
			addManifestFlags(fs)
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

	// Parsed by decodeRunOptions.
	kv              host.KVType
	att             host.Attention
	sampling        host.SamplingParams
	plan            swapPlan
	shareAnchors    bool // serve --share-anchors (host.LoadOptions.ShareAnchors)
	specOptions     `koanf:",squash"`
	manifestOptions `koanf:",squash"`
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

// logLevel shows only llama.cpp errors unless --verbose.
func logLevel(verbose bool) host.LogLevel {
	if verbose {
		return host.LogDebug
	}
	return host.LogError
}

// runRun loads the model, opens a session, wires the outputs and the step
// hook (a policy or a swap plan), generates and reports.
func runRun(c *cmdEnv, args []string) error {
	o, err := decodeRunOptions(c, args)
	if err != nil {
		return err
	}
	host.SetLog(c.Stderr, logLevel(o.Verbose))
	eng, path, err := loadRunModel(c, &o)
	if err != nil {
		return err
	}
	defer eng.Close()
	man, err := o.loadManifest(c, path)
	if err != nil {
		return err
	}
	sc := host.SessionConfig{NCtx: o.Ctx, Threads: o.Threads, KVType: o.kv, Attention: o.att}
	sess, err := eng.NewSession(sc)
	if err != nil {
		return err
	}
	defer sess.Close()
	if err := applyWindow(c, o.windowOptions, eng, sess, o.Ctx, o.policyOptions.enabled()); err != nil {
		return err
	}
	_, windowed := sess.(host.WindowSetter)
	prompt, err := runPrompt(c, eng.Vocab(), &o, o.policyOptions.enabled() && windowed)
	if err != nil {
		return err
	}
	out, err := openRunOutputs(c, o, eng, prompt)
	if err != nil {
		return err
	}
	defer out.close()
	out.stats.watchLayers(sess)
	out.stats.watchSets(sess)
	gen := host.GenerateOptions{NPredict: o.NPredict, Sampling: o.sampling, OnLogits: out.onLogits()}
	adapter, err := setStepHook(c, o, eng, sess, sc, &gen)
	if err != nil {
		return err
	}
	if adapter != nil {
		defer stopPolicy(c, adapter)
		if err := o.applyManifest(adapter, man); err != nil {
			return err
		}
		if out.gate != nil {
			out.gate.refresh = adapter.RefreshSensors
		}
	}
	out.started = true
	gen.Prompt, gen.Emit = prompt, out.emit
	if o.Draft != "" {
		return endLine(out.out, runSpec(c, o.specOptions, adapter, len(o.plan.at) > 0, eng, sess, gen, out.stats))
	}
	out.stats.begin(len(prompt), adapter)
	st, err := host.Generate(c.Ctx, sess, gen)
	if err = out.finish(st, err); err != nil {
		return err
	}
	c.Logf("prefill: %d tokens in %s (%.1f tok/s); decode: %d tokens, %.1f tok/s steady state (first step excluded)%s",
		st.PromptTokens, ms(st.Prefill), st.PrefillTPS(), st.GeneratedTokens, st.DecodeTPS(), eogNote(st))
	if adapter != nil {
		ps := adapter.Stats()
		c.Logf("policy: %d calls, %d changes, %d tier swaps, %d failures, %s in policy calls",
			ps.Calls, ps.Changes, ps.Swaps, ps.Failures, ms(ps.PolicyTime))
	}
	return nil
}

func eogNote(st host.Stats) string {
	if st.StoppedAtEOG {
		return "; stopped at end of generation"
	}
	return ""
}
