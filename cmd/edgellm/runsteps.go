package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/logitlog"
)

// The steps of `edgellm run` (run.go's runRun), in the order it takes them.

// decodeRunOptions reads and validates the settings.
func decodeRunOptions(c *cmdEnv, args []string) (runOptions, error) {
	var o runOptions
	if err := c.Decode(&o); err != nil {
		return o, err
	}
	if len(args) > 0 {
		return o, usagef("unexpected argument %q (the prompt goes in -p)", args[0])
	}
	if o.NPredict < 0 {
		return o, usagef("-n %d: want ≥ 0", o.NPredict)
	}
	var err error
	if o.kv, err = host.ParseKVType(o.KVType); err != nil {
		return o, usagef("--kv-type: %v", err)
	}
	if o.att, err = host.ParseAttention(o.Attention); err != nil {
		return o, usagef("--attention: %v", err)
	}
	o.sampling = o.params()
	if err := o.sampling.Validate(); err != nil {
		return o, usagef("%v", err)
	}
	if o.plan, err = parseSwapPlan(o.SwapAt, o.SwapTo, len(o.Tiers)); err != nil {
		return o, err
	}
	return o, nil
}

// loadRunModel loads the model (or the tier ladder) and says what it is; it
// returns the model's path ("" for a ladder).
func loadRunModel(c *cmdEnv, o *runOptions) (host.Engine, string, error) {
	path, label := "", ""
	if len(o.Tiers) == 0 {
		var err error
		if path, label, err = resolveModel(c, o.Model); err != nil {
			return nil, "", err
		}
	} else {
		label = strings.Join(o.Tiers, ",") + fmt.Sprintf(" (tier ladder, starting on tier %d)", o.Tier)
	}
	rl, err := parseRepackLayers(o.RepackLayers, o.Repack)
	if err != nil {
		return nil, "", err
	}
	if rl != 0 && o.Engine == "llamacpp" {
		return nil, "", usagef("--repack-layers %s: only the native engine repacks some layers (llama.cpp repacks all or nothing): drop it or use --engine native", o.RepackLayers)
	}
	wn, err := parseWillNeed(o.WillNeed)
	if err != nil {
		return nil, "", err
	}
	eng, err := host.Load(path, host.LoadOptions{Engine: o.Engine, Tiers: o.Tiers, StartTier: o.Tier, NoMmap: o.NoMmap, Repack: o.Repack, RepackLayers: rl, LayerSets: o.LayerSets, WillNeedLayers: wn, Kernels: o.Kernels, ShareAnchors: o.shareAnchors, Notices: c.Stderr})
	if err != nil {
		return nil, "", cliLoadError(err)
	}
	info := eng.Info()
	lim, err := modelLimit(info.NCtxTrain).withDraft(o.Draft)
	if err == nil {
		o.Ctx, err = fitCtx(c, o.Ctx, lim)
	}
	if err != nil {
		eng.Close()
		return nil, "", err
	}
	c.Logf("model: %s [%s, %s, %d layers, engine %s]", label, info.Arch, info.FileType, info.NLayer, eng.Name())
	if d := describeLayerSets(eng); d != "" {
		c.Logf("%s", d)
	}
	if o.Repack {
		c.Logf("%s", describeRepack(info))
	}
	return eng, path, nil
}

// runPrompt tokenizes -p (BOS alone without it), shrinks a default -n to
// what fits and checks that the prompt and -n fit --ctx. With --window the
// KV ring shifts the context (anchors plus the most recent tokens), so -n
// may run past --ctx; with a policy on an engine with a sliding window
// (policyWindow) an explicit -n may too, and generation stops at --ctx
// with "context full" unless the policy has set a window by then.
func runPrompt(c *cmdEnv, vocab host.Vocab, o *runOptions, policyWindow bool) ([]int32, error) {
	prompt := []int32{vocab.BOS()}
	if o.Prompt != "" {
		var err error
		if prompt, err = vocab.Tokenize(o.Prompt, true); err != nil {
			return nil, fmt.Errorf("tokenize prompt: %w", err)
		}
	}
	if o.Window > 0 {
		return prompt, nil // context shift (windowflags.go)
	}
	o.NPredict = fitNPredict(c, o.NPredict, len(prompt), o.Ctx)
	if len(prompt)+o.NPredict > o.Ctx {
		if policyWindow && len(prompt) <= o.Ctx {
			c.Logf("-n %d past --ctx %d: generation goes on past position %d only under a KV window set by the policy", o.NPredict, o.Ctx, o.Ctx)
			return prompt, nil
		}
		return nil, usagef("prompt of %d tokens + %d to generate exceed --ctx %d", len(prompt), o.NPredict, o.Ctx)
	}
	return prompt, nil
}

// runOutputs are where a run's tokens go: the text to stdout, and the
// --stats-json and --logits-out files.
type runOutputs struct {
	out    *bufio.Writer
	vocab  host.Vocab
	stats  *runStats
	logits *logitlog.Writer
	gate   *tokenGate // the scenario runner's token gate (nil: none)
	bare   bool       // no prompt: strip the first piece's SentencePiece space
	piece  []byte
	n      int
	// started is set when generation starts: until then a failure (a
	// policy that does not load, say) leaves no output file behind.
	started bool
	logPath string
}

func openRunOutputs(c *cmdEnv, o runOptions, eng host.Engine, prompt []int32) (*runOutputs, error) {
	r := &runOutputs{out: bufio.NewWriter(c.Stdout), vocab: eng.Vocab(), bare: o.Prompt == "", logPath: o.LogitsOut}
	var err error
	if r.gate, err = openGate(o.gateOptions); err != nil {
		return nil, err
	}
	if r.stats, err = openRunStats(o.StatsJSON, eng); err != nil {
		r.gate.Close()
		return nil, err
	}
	if o.LogitsOut != "" {
		if r.logits, err = logitlog.Create(o.LogitsOut, r.vocab.NVocab(), prompt); err != nil {
			r.stats.Remove()
			r.gate.Close()
			return nil, fmt.Errorf("--logits-out: %w", err)
		}
	}
	if o.Prompt != "" {
		fmt.Fprint(r.out, o.Prompt)
	}
	return r, nil
}

// emit writes one generated token.
func (r *runOutputs) emit(tok int32) error {
	r.piece = r.vocab.Piece(r.piece[:0], tok)
	if r.n == 0 && r.bare && len(r.piece) > 0 && r.piece[0] == ' ' {
		r.piece = r.piece[1:] // SentencePiece's space prefix at the start of text
	}
	r.out.Write(r.piece)
	r.stats.token(r.n)
	r.n++
	if r.logits != nil {
		if err := r.logits.Token(tok); err != nil {
			return fmt.Errorf("--logits-out: %w", err)
		}
	}
	if err := r.out.Flush(); err != nil {
		return err
	}
	return r.gate.pass(r.n)
}

// onLogits is GenerateOptions.OnLogits: nil without --logits-out.
func (r *runOutputs) onLogits() func(int, []float32) error {
	if r.logits == nil {
		return nil
	}
	return func(_ int, l []float32) error { return r.logits.Logits(l) }
}

// finish records the outcome and completes the outputs; it returns the
// generation's error, else the first output error.
func (r *runOutputs) finish(st host.Stats, err error) error {
	r.stats.end(st, err)
	if cerr := r.logits.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("--logits-out: %w", cerr)
	}
	r.logits = nil
	if cerr := r.stats.Close(); cerr != nil && err == nil {
		err = cerr
	}
	r.stats = nil
	fmt.Fprintln(r.out)
	if ferr := r.out.Flush(); ferr != nil && err == nil {
		err = fmt.Errorf("writing the text: %w", ferr)
	}
	return err
}

// close releases what finish did not (a run that failed before or during
// generation).
func (r *runOutputs) close() {
	r.logits.Close()
	if r.started {
		r.stats.Close()
	} else {
		r.stats.Remove()
		if r.logits != nil {
			os.Remove(r.logPath)
		}
	}
	r.gate.Close()
	r.out.Flush()
}

// setStepHook sets gen.BeforeStep: the policy's (returning its adapter) or
// the --swap-at plan's.
func setStepHook(c *cmdEnv, o runOptions, eng host.Engine, sess host.Session, sc host.SessionConfig, gen *host.GenerateOptions) (*host.Adapter, error) {
	plan := o.plan
	if o.DecisionLog != "" && !o.policyOptions.enabled() {
		return nil, usagef("--decision-log %s: there is no policy to log (--policy, --policy-inbox or --policy-repo)", o.DecisionLog)
	}
	if o.policyOptions.enabled() {
		if len(plan.at) > 0 {
			return nil, usagef("--policy and --swap-at both choose tiers: use one")
		}
		a, err := startPolicy(c, o.policyOptions, eng, sess, sc)
		if err != nil {
			return nil, err
		}
		gen.BeforeStep = a.BeforeStep
		return a, nil
	}
	if len(plan.at) == 0 {
		return nil, nil
	}
	swapper, ok := sess.(host.TierSwapper)
	if !ok {
		return nil, fmt.Errorf("engine %s cannot swap tiers", eng.Name())
	}
	next := 0
	gen.BeforeStep = func(step int) error {
		if next >= len(plan.at) || step != plan.at[next] {
			return nil
		}
		to := plan.to[next]
		next++
		t, err := swapper.SwapTier(to)
		if err != nil {
			return err
		}
		if eng.Name() == "native" { // weight sets: nothing serialised or reloaded (native.Session.SwapTier)
			c.Logf("\n[swap %d→%d at token %d: switch %s, release of the old tier %s, KV kept in place, total %s]",
				t.From, t.To, step, ms(t.Load), ms(t.Unload), ms(t.Total()))
			return nil
		}
		c.Logf("\n[swap %d→%d at token %d: state %.1f KiB, serialize %s, unload %s, load %s, restore %s, total %s]",
			t.From, t.To, step, float64(t.StateBytes)/1024, ms(t.Serialize), ms(t.Unload), ms(t.Load), ms(t.Restore), ms(t.Total()))
		return nil
	}
	return nil, nil
}

// describeRepack is run's load report line for --repack: what repacking
// cost, or that nothing in the model was eligible (not an error: the weights
// then all stay mapped). On the native engine only what is in use is
// written: with --repack-layers below all, the other units' share of the
// buffer is reserved, not written; with several weight sets (--tiers,
// --layer-sets) the sets no session uses wait until one does.
func describeRepack(info host.ModelInfo) string {
	if info.RepackTensors == 0 {
		return fmt.Sprintf("repack: nothing to repack in this model (%s: ggml repacks only %s matrices with rows in multiples of 8 on this CPU); weights stay mapped", info.FileType, strings.Join(host.RepackTypes(), ", "))
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	var s string
	switch {
	case info.RepackLayersMax > 0 && info.RepackLayers < info.RepackLayersMax:
		s = fmt.Sprintf("repack: %d of %d units (layers from 0, then the output head) copied into repacked layouts at load, %.1f MiB of anonymous memory (not page cache: not reclaimable under pressure); the other units read the mapped file, their share of the %.1f MiB buffer reserved, not written until a policy repacks them",
			info.RepackLayers, info.RepackLayersMax, mib(info.RepackInUseBytes), mib(info.RepackBytes))
	case info.RepackLayersMax > 0 && info.RepackInUseBytes < info.RepackBytes*9/10:
		s = fmt.Sprintf("repack: %d matrices eligible in all weight sets (%.1f MiB of buffers); %.1f MiB copied into repacked layouts for the set in use, anonymous memory (not page cache: not reclaimable under pressure); another set's copy is written when a session first uses it",
			info.RepackTensors, mib(info.RepackBytes), mib(info.RepackInUseBytes))
	default:
		s = fmt.Sprintf("repack: %d matrices copied into repacked layouts, %.1f MiB of anonymous memory (not page cache: not reclaimable under pressure)",
			info.RepackTensors, mib(info.RepackBytes))
	}
	if info.RepackHugePageBytes > 0 {
		s += fmt.Sprintf("; %.1f MiB of the buffers advised for transparent huge pages", mib(info.RepackHugePageBytes))
	}
	return s
}
