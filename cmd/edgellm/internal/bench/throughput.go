package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/edgellm/edgellm/host"
)

// ErrContext marks options that do not fit the model's context (the CLI
// reports it as a usage error).
var ErrContext = errors.New("does not fit the context")

// Options configures Run and Compare.
type Options struct {
	// Engine is host.LoadOptions.Engine ("auto", "native", "llamacpp"),
	// optionally with the suffixes ":repack" and ":edgellm" (ParseEngine).
	Engine string
	// NPrompt prompt tokens are prefilled as one batch; NGen tokens are then
	// generated (NGen-1 forward passes, the first of them untimed warm-up).
	NPrompt, NGen int
	// Repeats is the number of fresh sessions per engine (≥ 1).
	Repeats int
	// Threads for decode and prefill; 0 = all cores.
	Threads int
	// NCtx is the session context; 0 = SessionConfig.Resolve's default.
	NCtx   int
	KVType host.KVType
	// Attention is the attention kernel of both engines (auto: flash on CPU).
	Attention host.Attention
	// Repack repacks eligible weights on every engine measured
	// (host.LoadOptions.Repack); an engine named with ":repack" is repacked
	// either way.
	Repack bool
	// Kernels is host.LoadOptions.Kernels for every native engine measured
	// ("" = ggml's); an engine named with ":edgellm" runs edgellm's either
	// way.
	Kernels string
	// Text is tokenized into the prompt (see MakePrompt); TextName labels it.
	Text, TextName string
	// Progress receives one line per load and per repeat; nil discards.
	Progress io.Writer
	// MemTick is the memory sampling tick; 0 = DefaultMemInterval.
	MemTick time.Duration
	// Setup, when set, is applied to every fresh session before its prompt
	// (the CLI's KV window and --evict); an error ends the run.
	Setup func(host.Engine, host.Session) error
}

// Validate checks what can be checked without the model.
func (o Options) Validate() error {
	switch {
	case o.NPrompt < 1:
		return fmt.Errorf("prompt of %d tokens (want ≥ 1)", o.NPrompt)
	case o.NGen < 3:
		return fmt.Errorf("%d generated tokens (want ≥ 3: the first decode step is untimed warm-up)", o.NGen)
	case o.Repeats < 1:
		return fmt.Errorf("%d repeats (want ≥ 1)", o.Repeats)
	case o.Threads < 0:
		return fmt.Errorf("%d threads (want ≥ 0)", o.Threads)
	case o.NCtx < 0:
		return fmt.Errorf("context of %d tokens (want ≥ 0)", o.NCtx)
	}
	if _, err := host.ParseKVType(string(o.kvType())); err != nil {
		return err
	}
	return nil
}

func (o Options) kvType() host.KVType {
	if o.KVType == "" {
		return host.KVF16
	}
	return o.KVType
}

// Repeat is one fresh-session run.
type Repeat struct {
	PrefillTPS float64 `json:"prefill_tps"`
	DecodeTPS  float64 `json:"decode_tps"`
	PrefillMS  float64 `json:"prefill_ms"`
	// DecodeMS is the time of the DecodeTokens timed steps.
	DecodeMS     float64 `json:"decode_ms"`
	DecodeTokens int     `json:"decode_tokens"`
	// The same rates over the generating thread's CPU time (host.Stats).
	PrefillCPUTPS float64 `json:"prefill_cpu_tps"`
	DecodeCPUTPS  float64 `json:"decode_cpu_tps"`
	// DecodeProcCPUMS is the whole process's CPU time over the decode
	// (every thread, host.Stats.DecodeProcCPU). SamplerCPUMS is the part of
	// it the bench's own memory sampler spent (MemSampler.CPU over the same
	// steps). DecodeCores is their difference over the decode's wall time:
	// the cores the engine and the Go runtime kept busy, which is what `run`
	// costs; SamplerCores is the sampler's share, reported beside it.
	DecodeProcCPUMS float64 `json:"decode_proc_cpu_ms"`
	SamplerCPUMS    float64 `json:"sampler_cpu_ms"`
	DecodeCores     float64 `json:"decode_cores"`
	SamplerCores    float64 `json:"sampler_cores"`
}

// Result is one engine's benchmark.
type Result struct {
	Engine  string `json:"engine"`
	Model   string `json:"model"`
	NPrompt int    `json:"n_prompt"`
	NGen    int    `json:"n_gen"`
	NCtx    int    `json:"n_ctx"`
	Threads int    `json:"threads"`
	KVType  string `json:"kv_type"`
	// Attention is the session setting (auto: each engine's choice, flash
	// attention on CPU for both).
	Attention string `json:"attention"`
	Repeats   int    `json:"repeats"`
	// Repack: the weights were repacked (host.LoadOptions.Repack);
	// RepackMB is the anonymous memory that cost (engine.ModelInfo).
	Repack        bool    `json:"repack"`
	RepackMB      float64 `json:"repack_mb"`
	RepackTensors int     `json:"repack_tensors"`
	// PrefillTPS and DecodeTPS are medians over the repeats.
	PrefillTPS float64 `json:"prefill_tps"`
	DecodeTPS  float64 `json:"decode_tps"`
	// PrefillCPUTPS and DecodeCPUTPS are medians of the rates over the
	// generating thread's CPU time: with one thread, the compute without the
	// time a busy machine kept the thread off the CPU.
	PrefillCPUTPS float64 `json:"prefill_cpu_tps"`
	DecodeCPUTPS  float64 `json:"decode_cpu_tps"`
	// PrefillSpread and DecodeSpread are min / median / max over the
	// repeats; Warnings flags a spread above SpreadLimit.
	PrefillSpread Spread `json:"prefill_spread"`
	DecodeSpread  Spread `json:"decode_spread"`
	// DecodeCores is the median over the repeats of the process's CPU time
	// (all threads) ÷ wall time during decode, without the bench's own
	// memory sampler, beside the generating thread's rate above: helpers
	// that spin count here. SamplerCores is the median of the sampler's
	// share, left out of DecodeCores.
	DecodeCores  float64 `json:"decode_cores"`
	SamplerCores float64 `json:"sampler_cores"`
	LoadMS       float64 `json:"load_ms"`
	// RSSPeakMB and PSSPeakMB (MiB) are the process's peaks over load and all
	// repeats. Compare leaves them 0 on each side (both engines are resident
	// together) and reports the process peak on the CompareResult.
	RSSPeakMB float64 `json:"rss_peak_mb,omitempty"`
	PSSPeakMB float64 `json:"pss_peak_mb,omitempty"`
	// RSSLoadMB and PSSLoadMB are what loading this engine added (MiB).
	RSSLoadMB float64 `json:"rss_load_mb"`
	PSSLoadMB float64 `json:"pss_load_mb"`
	// KVBytesPerToken is reported by sessions that implement
	// KVBytesPerToken() int64; omitted otherwise.
	KVBytesPerToken int64 `json:"kv_bytes_per_token,omitempty"`
	// KVStateBytesPerToken (llamacpp) is the growth of the serialised
	// sequence state (llama_state_seq_get_size) per token: the KV rows plus
	// llama.cpp's per-cell metadata (position and sequence ids).
	KVStateBytesPerToken int64 `json:"kv_state_bytes_per_token,omitempty"`
	// KVEvict is the eviction mode the sessions' KV window ran with, read
	// back from the session (host.EvictSetter; omitted by engines without).
	KVEvict      string   `json:"kv_evict,omitempty"`
	PerRepeat    []Repeat `json:"per_repeat"`
	Sampling     string   `json:"sampling"`
	PromptSource string   `json:"prompt_source"`
	MemSamples   int      `json:"mem_samples"`
	SmapsSamples int      `json:"smaps_samples"`
}

// CompareResult is two engines measured in one process, repeats interleaved.
type CompareResult struct {
	A *Result `json:"a"`
	B *Result `json:"b"`
	// DecodeRatio and PrefillRatio are A/B of the median tok/s.
	DecodeRatio  float64 `json:"decode_ratio"`
	PrefillRatio float64 `json:"prefill_ratio"`
	// DecodeCPURatio and PrefillCPURatio are A/B of the CPU-time rates: the
	// noise-robust comparison on a shared machine when Threads is 1.
	DecodeCPURatio  float64 `json:"decode_cpu_ratio"`
	PrefillCPURatio float64 `json:"prefill_cpu_ratio"`
	// RSSPeakMB and PSSPeakMB are the process's peaks with both engines loaded.
	RSSPeakMB float64 `json:"rss_peak_mb"`
	PSSPeakMB float64 `json:"pss_peak_mb"`
	// C is a third engine measured in the same rounds (CompareAll), and
	// the ratios A/C; nil without one.
	C                *Result `json:"c,omitempty"`
	DecodeRatioC     float64 `json:"decode_ratio_c,omitempty"`
	PrefillRatioC    float64 `json:"prefill_ratio_c,omitempty"`
	DecodeCPURatioC  float64 `json:"decode_cpu_ratio_c,omitempty"`
	PrefillCPURatioC float64 `json:"prefill_cpu_ratio_c,omitempty"`
}

// kvBytesPerTokener is the optional session method that reports the KV
// memory of one token across all layers.
type kvBytesPerTokener interface{ KVBytesPerToken() int64 }

// stateSizer is the optional session method that reports the size of the
// engine's serialized sequence state (llama.cpp's sessions have it).
type stateSizer interface{ StateBytes() (int, error) }

// side is one loaded engine and its results.
type side struct {
	eng    host.Engine
	res    *Result
	prompt Prompt
	decode []float64
	fill   []float64
	decCPU []float64
	pfCPU  []float64
	cores  []float64
	samp   []float64
	mem    *MemSampler
	tag    string // "A: " / "B: " in Compare's progress lines
}

// greedy is the benchmark's sampling: argmax, no penalties (the seed is fixed
// but unused by argmax).
var greedy = host.SamplingParams{Temp: 0, TopK: 0, TopP: 1, MinP: 0, RepeatPenalty: 1, Seed: 42}

// RepackSuffix on an engine name (Options.Engine, Compare's engines) loads
// that side with repacked weights: "native:repack" against "native" measures
// what repacking gives in one process.
const RepackSuffix = ":repack"

// KernelsSuffix on an engine name runs that side's weight matmuls on
// edgellm's own kernels (host.LoadOptions.Kernels "edgellm"):
// "native:edgellm" against "native" measures them against ggml's in one
// process. It combines with RepackSuffix (repacked matrices keep ggml's).
const KernelsSuffix = ":edgellm"

// ParseEngine splits an engine name into the host.LoadOptions engine and
// whether RepackSuffix asked for repacked weights (KernelsSuffix, in either
// order, is dropped: EngineKernels reads it).
func ParseEngine(s string) (engine string, repack bool) {
	s = strings.Replace(s, KernelsSuffix, "", 1)
	if e, ok := strings.CutSuffix(s, RepackSuffix); ok {
		return e, true
	}
	return s, false
}

// EngineKernels is the host.LoadOptions.Kernels an engine name asks for:
// "edgellm" with KernelsSuffix, else def.
func EngineKernels(s, def string) string {
	if strings.Contains(s, KernelsSuffix) {
		return "edgellm"
	}
	return def
}

func load(path, engineName string, o Options, mem *MemSampler) (*side, error) {
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	engine, repack := ParseEngine(engineName)
	repack = repack || o.Repack
	kern := EngineKernels(engineName, o.Kernels)
	if engine == "llamacpp" && kern == "edgellm" && !strings.Contains(engineName, KernelsSuffix) {
		kern = "" // Options.Kernels is for the native engines measured
	}
	rss0, pss0 := mem.Now()
	t0 := time.Now()
	eng, err := host.Load(path, host.LoadOptions{Engine: engine, Repack: repack, Kernels: kern, Notices: progress})
	if err != nil {
		return nil, err
	}
	loadTime := time.Since(t0)
	rss1, pss1 := mem.Now()
	info := eng.Info()
	nctx := host.SessionConfig{NCtx: o.NCtx}.Resolve(info.NCtxTrain).NCtx
	if nctx > info.NCtxTrain {
		eng.Close()
		return nil, fmt.Errorf("context %d is above the model's training context %d: %w", nctx, info.NCtxTrain, ErrContext)
	}
	if o.NPrompt+o.NGen > nctx {
		eng.Close()
		return nil, fmt.Errorf("%d prompt + %d generated tokens exceed the context of %d: %w", o.NPrompt, o.NGen, nctx, ErrContext)
	}
	p, err := MakePrompt(eng.Vocab(), o.Text, o.TextName, o.NPrompt)
	if err != nil {
		eng.Close()
		return nil, err
	}
	threads := o.Threads
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	name := eng.Name()
	if kern == "edgellm" {
		name += KernelsSuffix
	}
	if repack {
		name += RepackSuffix
		fmt.Fprintf(progress, "bench: %s repacked %d matrices: %.1f MiB of anonymous memory (not reclaimable)\n", name, info.RepackTensors, mib(info.RepackBytes))
	} else if info.RepackBytes > 0 {
		fmt.Fprintf(progress, "bench: %s copied %d matrices into edgellm's layout: %.1f MiB of anonymous memory (not reclaimable; the mapped originals dropped)\n", name, info.RepackTensors, mib(info.RepackBytes))
	}
	fmt.Fprintf(progress, "bench: %s loaded %s in %.1f ms (%s, %d layers)\n", name, path, millis(loadTime), info.FileType, info.NLayer)
	return &side{eng: eng, prompt: p, mem: mem, res: &Result{
		Engine: name, Model: path, Repack: repack, RepackMB: mib(info.RepackBytes), RepackTensors: info.RepackTensors, NPrompt: o.NPrompt, NGen: o.NGen, NCtx: nctx,
		Threads: threads, KVType: string(o.kvType()), Attention: o.Attention.String(), Repeats: o.Repeats,
		LoadMS:    millis(loadTime),
		RSSLoadMB: mib(rss1 - rss0), PSSLoadMB: mib(pss1 - pss0),
		Sampling: "greedy, end-of-generation ignored", PromptSource: p.Source,
	}}, nil
}

// repeat runs one fresh session: prefill the prompt, generate NGen tokens.
func (s *side) repeat(ctx context.Context, o Options, i int) error {
	sess, err := s.eng.NewSession(host.SessionConfig{NCtx: s.res.NCtx, Threads: o.Threads, KVType: o.kvType(), Attention: o.Attention})
	if err != nil {
		return err
	}
	defer sess.Close()
	if o.Setup != nil {
		if err := o.Setup(s.eng, sess); err != nil {
			return err
		}
	}
	if es, ok := sess.(host.EvictSetter); ok {
		s.res.KVEvict = es.EvictMode()
	}
	ss, hasState := sess.(stateSizer)
	state0 := 0
	if hasState {
		state0, _ = ss.StateBytes()
	}
	// Generate's decode span starts right after BeforeStep(2) and ends when
	// it returns: the sampler's CPU over the same steps is subtracted.
	var samp0 time.Duration
	mark := func(step int) error {
		if step == 2 && s.mem != nil {
			samp0 = s.mem.CPU()
		}
		return nil
	}
	st, err := host.Generate(ctx, sess, host.GenerateOptions{Prompt: s.prompt.Tokens,
		NPredict: o.NGen, Sampling: greedy, IgnoreEOG: true, MeasureCPU: true, BeforeStep: mark})
	if err != nil {
		return err
	}
	var samp time.Duration
	if s.mem != nil {
		samp = s.mem.CPU() - samp0
	}
	if st.GeneratedTokens != o.NGen || st.DecodeTokens != o.NGen-1 {
		return fmt.Errorf("generated %d tokens (%d timed), want %d (%d timed)", st.GeneratedTokens, st.DecodeTokens, o.NGen, o.NGen-1)
	}
	r := Repeat{PrefillTPS: st.PrefillTPS(), DecodeTPS: st.DecodeTPS(),
		PrefillMS: millis(st.Prefill), DecodeMS: millis(st.Decode), DecodeTokens: st.DecodeTokens,
		PrefillCPUTPS: st.PrefillCPUTPS(), DecodeCPUTPS: st.DecodeCPUTPS(),
		DecodeProcCPUMS: millis(st.DecodeProcCPU), SamplerCPUMS: millis(samp)}
	if span := st.DecodeSpan.Seconds(); span > 0 {
		r.DecodeCores = max(0, (st.DecodeProcCPU-samp).Seconds()/span)
		r.SamplerCores = samp.Seconds() / span
	}
	s.res.PerRepeat = append(s.res.PerRepeat, r)
	s.fill = append(s.fill, r.PrefillTPS)
	s.decode = append(s.decode, r.DecodeTPS)
	s.pfCPU = append(s.pfCPU, r.PrefillCPUTPS)
	s.decCPU = append(s.decCPU, r.DecodeCPUTPS)
	s.cores = append(s.cores, r.DecodeCores)
	s.samp = append(s.samp, r.SamplerCores)
	if k, ok := sess.(kvBytesPerTokener); ok {
		s.res.KVBytesPerToken = k.KVBytesPerToken()
	}
	if hasState && sess.Len() > 0 {
		if state1, err := ss.StateBytes(); err == nil && state1 > state0 {
			s.res.KVStateBytesPerToken = int64(state1-state0) / int64(sess.Len())
		}
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "bench: %s%s repeat %d/%d: prefill %d tok %.1f tok/s, decode %d tok %.1f tok/s (%.2f cores busy; bench's memory sampler %.3f more)\n",
			s.tag, s.res.Engine, i+1, o.Repeats, st.PromptTokens, r.PrefillTPS, st.DecodeTokens, r.DecodeTPS, r.DecodeCores, r.SamplerCores)
	}
	return nil
}

func (s *side) finish() {
	s.res.PrefillTPS = Median(s.fill)
	s.res.DecodeTPS = Median(s.decode)
	s.res.PrefillCPUTPS = Median(s.pfCPU)
	s.res.DecodeCPUTPS = Median(s.decCPU)
	s.res.PrefillSpread, s.res.DecodeSpread = spreadOf(s.fill), spreadOf(s.decode)
	s.res.DecodeCores = Median(s.cores)
	s.res.SamplerCores = Median(s.samp)
}

// Run loads the model at path on o.Engine and measures it: load time, then
// o.Repeats fresh sessions, with the process's peak memory sampled throughout.
func Run(ctx context.Context, path string, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	mem, err := NewMemSampler(o.MemTick)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	mem.Start()
	s, err := load(path, o.Engine, o, mem)
	if err != nil {
		return nil, err
	}
	defer s.eng.Close()
	for i := range o.Repeats {
		if err := s.repeat(ctx, o, i); err != nil {
			return nil, fmt.Errorf("%s repeat %d: %w", s.res.Engine, i+1, err)
		}
	}
	peak := mem.Stop()
	s.finish()
	s.res.RSSPeakMB, s.res.PSSPeakMB = mib(peak.RSS), mib(peak.PSS)
	s.res.MemSamples, s.res.SmapsSamples = peak.Samples, peak.SmapsSamples
	return s.res, nil
}

// Compare loads the model at path on engines a and b, then runs their
// repeats interleaved (a, b, a, b, ...) with the same prompt tokens, threads
// and KV type, and reports each side and the ratios a/b.
func Compare(ctx context.Context, path, a, b string, o Options) (*CompareResult, error) {
	return CompareAll(ctx, path, a, []string{b}, o)
}

// CompareAll is Compare against one or two engines (B, and C when
// len(others) is 2), all loaded in one process and run in the same
// interleaved rounds (a, b, c, a, b, c, ...).
func CompareAll(ctx context.Context, path, a string, others []string, o Options) (*CompareResult, error) {
	if len(others) < 1 || len(others) > 2 {
		return nil, fmt.Errorf("compare against %d engines (want 1 or 2)", len(others))
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	mem, err := NewMemSampler(o.MemTick)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	mem.Start()
	sa, err := load(path, a, o, mem)
	if err != nil {
		return nil, fmt.Errorf("engine %s: %w", a, err)
	}
	defer sa.eng.Close()
	sides := []*side{sa}
	for i, b := range others {
		sb, err := load(path, b, o, mem)
		if err != nil {
			return nil, fmt.Errorf("engine %s: %w", b, err)
		}
		defer sb.eng.Close()
		sb.tag = string(rune('B'+i)) + " "
		if !slices.Equal(sa.prompt.Tokens, sb.prompt.Tokens) {
			return nil, fmt.Errorf("engines %s and %s tokenize the prompt differently", a, b)
		}
		sides = append(sides, sb)
	}
	sa.tag = "A "
	sb := sides[1]
	for i := range o.Repeats {
		for _, s := range sides {
			if err := s.repeat(ctx, o, i); err != nil {
				return nil, fmt.Errorf("%s repeat %d: %w", s.res.Engine, i+1, err)
			}
		}
	}
	peak := mem.Stop()
	for _, s := range sides {
		s.finish()
		s.res.MemSamples, s.res.SmapsSamples = peak.Samples, peak.SmapsSamples
	}
	r := &CompareResult{A: sa.res, B: sb.res,
		DecodeRatio:     ratio(sa.res.DecodeTPS, sb.res.DecodeTPS),
		PrefillRatio:    ratio(sa.res.PrefillTPS, sb.res.PrefillTPS),
		DecodeCPURatio:  ratio(sa.res.DecodeCPUTPS, sb.res.DecodeCPUTPS),
		PrefillCPURatio: ratio(sa.res.PrefillCPUTPS, sb.res.PrefillCPUTPS),
		RSSPeakMB:       mib(peak.RSS), PSSPeakMB: mib(peak.PSS),
	}
	if len(sides) == 3 {
		sc := sides[2]
		r.C = sc.res
		r.DecodeRatioC, r.PrefillRatioC = ratio(sa.res.DecodeTPS, sc.res.DecodeTPS), ratio(sa.res.PrefillTPS, sc.res.PrefillTPS)
		r.DecodeCPURatioC, r.PrefillCPURatioC = ratio(sa.res.DecodeCPUTPS, sc.res.DecodeCPUTPS), ratio(sa.res.PrefillCPUTPS, sc.res.PrefillCPUTPS)
	}
	return r, nil
}
