package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/cputime"
	"github.com/edgellm/edgellm/internal/sample"
)

// SamplingParams configures token sampling: greedy when Temp ≤ 0, otherwise a
// seeded draw after repetition penalty, top-k, top-p, min-p and temperature.
type SamplingParams = engine.SamplingParams

// DefaultSampling returns llama.cpp's default sampling parameters.
func DefaultSampling() SamplingParams { return engine.DefaultSampling() }

// GreedySampling is DefaultSampling with temperature 0: the most likely
// token at every step.
func GreedySampling() SamplingParams {
	p := engine.DefaultSampling()
	p.Temp = 0
	return p
}

// resolveSampling is p, or DefaultSampling() for the zero value.
func resolveSampling(p SamplingParams) SamplingParams {
	if p == (SamplingParams{}) {
		return DefaultSampling()
	}
	return p
}

// GenerateOptions is one Generate request: what to condition on, how many
// tokens to generate, how to sample them and where they go. The zero value
// of every field works: default sampling, stop at end-of-generation, no
// hook. The session supplies the rest (its engine's vocabulary).
type GenerateOptions struct {
	// Prompt is decoded into the session before generation: on a new
	// session the whole prompt (start from BOS: Tokenize(sess, text)
	// does), on a session that has decoded before the conversation's next
	// tokens (Tokenize(sess, text) adds no BOS and no tokenizer prefix
	// there). Required: it is what the first token is sampled after.
	Prompt []int32
	// Emit receives each generated token in order; nil discards them. An
	// error stops generation.
	Emit func(tok int32) error
	// NPredict is the number of tokens to generate.
	NPredict int
	// Sampling selects the sampler; the zero value is DefaultSampling()
	// (llama.cpp's defaults). Greedy decoding: DefaultSampling() with
	// Temp 0, or GreedySampling().
	Sampling SamplingParams
	// IgnoreEOG keeps generating past end-of-generation tokens (they are
	// emitted like any other); by default generation stops at the first
	// one, which is not emitted.
	IgnoreEOG bool
	// MeasureCPU also records the thread CPU time of prefill and decode
	// (Stats.PrefillCPU, DecodeCPU; benchmarks): two system calls per step,
	// and Generate keeps its goroutine on one OS thread meanwhile.
	MeasureCPU bool
	// BeforeStep, if set, runs before each decode step (step counts the
	// tokens this call generated so far), and once with step 0 before the
	// prompt's prefill, so that a policy's first decision (threads, tier,
	// precision) already applies to the prefill: step 0 starts a call.
	// Adapter.BeforeStep numbers the steps of its session across calls
	// itself. It may swap tiers or apply a policy decision; an error stops
	// generation.
	BeforeStep func(step int) error
	// OnLogits, if set, sees the raw logits each generated token i is
	// sampled from (before any sampler transform), e.g. to measure quality
	// against another tier offline. The slice is reused: copy what you keep.
	// An error stops generation. Not with Draft.
	OnLogits func(i int, logits []float32) error
	// Draft, if set, generates with speculative decoding (AttachDraft on
	// this session before it decoded anything): the Draft's own sampler
	// (DraftOptions.Sampling) replaces Sampling, BeforeStep runs before
	// each round, and the Stats' decode figures count rounds after the
	// first. The session stays a conversation: later calls continue it
	// with the same Draft (a call without it on a session with a Draft
	// makes the Draft refuse the next call).
	Draft *Draft
}

// Stats are the timings of one Generate call. Decode throughput is steady
// state: the first decode step is excluded.
type Stats struct {
	PromptTokens    int
	GeneratedTokens int
	Prefill         time.Duration
	// Decode is the time of the steps after the first (steady state: a
	// step is a decode, or a speculative round with a Draft) and of the
	// final decode of the last emitted token; DecodeTokens counts the
	// tokens they produced (n-1 for n plain tokens).
	Decode       time.Duration
	DecodeTokens int
	FirstToken   time.Duration // prefill + the first sample
	StoppedAtEOG bool
	// PrefillCPU and DecodeCPU are the calling thread's CPU time over the
	// same spans, with GenerateOptions.MeasureCPU (else 0). With one
	// compute thread that is all the compute, and time the thread spent
	// descheduled on a busy machine does not count: the noise-robust
	// measure for comparisons.
	PrefillCPU, DecodeCPU time.Duration
	// DecodeProcCPU is the whole process's CPU time (every thread:
	// compute helpers, spinning or polling workers, the Go runtime) from the
	// start of the second decode step to the end of generation, and
	// DecodeSpan the wall time of that span (sampling included), with
	// MeasureCPU. DecodeProcCPU / DecodeSpan is how many cores the process
	// kept busy while decoding: at most the thread count for an engine that
	// burns no core it does not compute on.
	DecodeProcCPU, DecodeSpan time.Duration
}

// DecodeCores is DecodeProcCPU / DecodeSpan (0 without a measurement).
func (s Stats) DecodeCores() float64 {
	if s.DecodeSpan <= 0 {
		return 0
	}
	return s.DecodeProcCPU.Seconds() / s.DecodeSpan.Seconds()
}

// PrefillCPUTPS is prompt tokens per second of thread CPU time.
func (s Stats) PrefillCPUTPS() float64 { return tps(s.PromptTokens, s.PrefillCPU) }

// DecodeCPUTPS is steady-state generated tokens per second of thread CPU time.
func (s Stats) DecodeCPUTPS() float64 { return tps(s.DecodeTokens, s.DecodeCPU) }

// threadCPU reads the thread's CPU time only when measuring.
// beginGeneration is what both generation loops do before the prefill:
// with MeasureCPU, keep the goroutine on one OS thread (thread CPU time
// needs one thread; call the returned function when done), then run the
// step-0 decision (BeforeStep(0)), so that a policy's first decision applies
// to the prefill.
func beginGeneration(opts GenerateOptions) (done func(), err error) {
	done = func() {}
	if opts.MeasureCPU {
		runtime.LockOSThread()
		done = runtime.UnlockOSThread
	}
	if opts.BeforeStep != nil {
		if err := opts.BeforeStep(0); err != nil {
			done()
			return nil, err
		}
	}
	return done, nil
}

func threadCPU(measure bool) time.Duration {
	if !measure {
		return 0
	}
	return cputime.Thread()
}

// PrefillTPS is prompt tokens per second.
func (s Stats) PrefillTPS() float64 { return tps(s.PromptTokens, s.Prefill) }

// DecodeTPS is steady-state generated tokens per second.
func (s Stats) DecodeTPS() float64 { return tps(s.DecodeTokens, s.Decode) }

func tps(n int, d time.Duration) float64 {
	if n == 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generate decodes opts.Prompt into sess and generates up to opts.NPredict
// tokens, passing each to opts.Emit. A session is a conversation: every
// emitted token is in the session's KV cache when Generate returns (even
// when Emit's error, ctx or BeforeStep stopped it), so a later call
// continues from it exactly as one prompt holding the whole conversation
// would; with a Draft too. BeforeStep may change the session's engine
// state between steps (a tier swap keeps the same Session value). Nothing
// is allocated per token.
//
// There is one generation loop: it prefills, emits, stops (NPredict,
// end-of-generation, Emit's error, ctx, BeforeStep) and finishes the
// conversation; what one step is (a plain decode and sample, or a
// speculative round) is a stepper (plainStepper here, draftStepper in
// draftgen.go).
func Generate(ctx context.Context, sess Session, opts GenerateOptions) (Stats, error) {
	var st Stats
	if sess == nil {
		return st, errors.New("Generate: nil Session")
	}
	vocab, prompt, emit := sess.Engine().Vocab(), opts.Prompt, opts.Emit
	if emit == nil {
		emit = func(int32) error { return nil }
	}
	if len(prompt) == 0 {
		return st, errors.New("GenerateOptions.Prompt is empty: nothing to condition on (a new session starts from BOS; see Tokenize)")
	}
	if opts.NPredict < 0 {
		return st, fmt.Errorf("GenerateOptions.NPredict %d is negative", opts.NPredict)
	}
	var sg stepper
	var err error
	if opts.Draft != nil {
		sg, err = newDraftStepper(sess, opts)
	} else {
		sg, err = newPlainStepper(sess, vocab.NVocab(), opts)
	}
	if err != nil {
		return st, err
	}

	cpu := opts.MeasureCPU
	done, err := beginGeneration(opts)
	if err != nil {
		return st, err
	}
	defer done()

	// prefill
	start, c0 := time.Now(), threadCPU(cpu)
	if err := sg.prefill(prompt); err != nil {
		return st, fmt.Errorf("prefill of %d tokens: %w", len(prompt), err)
	}
	st.PromptTokens = len(prompt)
	st.Prefill, st.PrefillCPU = time.Since(start), threadCPU(cpu)-c0
	if opts.NPredict == 0 {
		return st, nil
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	toks, err := sg.first()
	if err != nil {
		return st, err
	}
	st.FirstToken = time.Since(start)

	// steps: emit a step's tokens, stop or run the next step. Every step
	// but the first is timed (the first is warm-up), and so is the final
	// decode that puts the last emitted token into the KV cache.
	var spanStart time.Time
	var proc0 time.Duration
	for step := 0; ; step++ {
		kept := 0
		stop := ctx.Err()
		for _, tok := range toks {
			if stop != nil {
				break
			}
			if st.GeneratedTokens == opts.NPredict {
				break
			}
			if !opts.IgnoreEOG && vocab.IsEOG(tok) {
				st.StoppedAtEOG = true
				break
			}
			kept++
			st.GeneratedTokens++
			if stop = emit(tok); stop != nil {
				break
			}
		}
		// BeforeStep runs before each step that decodes: the next step,
		// or the final decode of a step whose tokens were all emitted.
		if stop == nil && kept == len(toks) {
			if stop = ctx.Err(); stop == nil && opts.BeforeStep != nil {
				stop = opts.BeforeStep(st.GeneratedTokens)
			}
		}
		timed := step > 0
		if cpu && timed && spanStart.IsZero() {
			spanStart, proc0 = time.Now(), cputime.Process()
		}
		t0, c0 := time.Now(), threadCPU(cpu)
		if stop != nil || kept < len(toks) || st.GeneratedTokens == opts.NPredict {
			// done: keep exactly the emitted tokens in the conversation
			n, err := sg.finish(kept)
			if err != nil {
				err = fmt.Errorf("decode at position %d: %w", sess.Len(), err)
			} else if timed && n > 0 {
				st.Decode += time.Since(t0)
				st.DecodeCPU += threadCPU(cpu) - c0
				st.DecodeTokens += n
			}
			if cpu && !spanStart.IsZero() {
				st.DecodeSpan, st.DecodeProcCPU = time.Since(spanStart), cputime.Process()-proc0
			}
			if stop != nil && err != nil {
				return st, errors.Join(stop, err)
			}
			if stop != nil {
				return st, stop
			}
			return st, err
		}
		if err := sg.advance(); err != nil {
			return st, fmt.Errorf("%s at position %d: %w", sg.name(), sess.Len(), err)
		}
		if timed {
			st.Decode += time.Since(t0)
			st.DecodeCPU += threadCPU(cpu) - c0
		}
		if toks, err = sg.next(); err != nil {
			return st, err
		}
		if timed {
			st.DecodeTokens += min(len(toks), opts.NPredict-st.GeneratedTokens)
		}
	}
}

// stepper is what one step of Generate's loop is: advance (timed as
// decode), then next. Tokens a stepper returns are sampled but not yet
// decoded; the slice is reused by the next call.
type stepper interface {
	// prefill decodes the prompt (the conversation's next tokens).
	prefill(prompt []int32) error
	// first samples the tokens after the prefill (one).
	first() ([]int32, error)
	// advance decodes what the last call returned (a plain decode, or a
	// whole speculative round).
	advance() error
	// next returns the tokens after advance (at least one): a plain
	// sample, or the round's tokens. Plain sampling is not decode time.
	next() ([]int32, error)
	// finish ends the call: of the tokens the last call returned, the
	// first kept were emitted; the session is left holding exactly the
	// emitted tokens. It returns how many tokens it decoded.
	finish(kept int) (int, error)
	name() string // what a step is, for errors
}

// plainStepper is one decode and one sample per step.
type plainStepper struct {
	sess     Session
	smp      *sample.Sampler
	logits   []float32
	one      []int32 // the sampled, not yet decoded token
	i        int     // tokens sampled
	onLogits func(i int, logits []float32) error
}

func newPlainStepper(sess Session, nVocab int, opts GenerateOptions) (*plainStepper, error) {
	smp, err := sample.New(resolveSampling(opts.Sampling), nVocab)
	if err != nil {
		return nil, fmt.Errorf("GenerateOptions.Sampling: %w", err)
	}
	return &plainStepper{sess: sess, smp: smp, logits: make([]float32, nVocab), one: make([]int32, 1), onLogits: opts.OnLogits}, nil
}

func (p *plainStepper) name() string { return "decode" }

func (p *plainStepper) prefill(prompt []int32) error {
	for _, t := range prompt {
		p.smp.Accept(t)
	}
	if err := p.sess.Decode(prompt, LogitsLast); err != nil {
		return err
	}
	return p.sess.Logits(len(prompt)-1, p.logits)
}

func (p *plainStepper) first() ([]int32, error) {
	if p.onLogits != nil {
		if err := p.onLogits(p.i, p.logits); err != nil {
			return nil, err
		}
	}
	tok, err := p.smp.Sample(p.logits)
	if err != nil {
		return nil, err
	}
	p.i++
	p.one[0] = tok
	return p.one, nil
}

func (p *plainStepper) advance() error {
	p.smp.Accept(p.one[0])
	if err := p.sess.Decode(p.one, LogitsLast); err != nil {
		return err
	}
	return p.sess.Logits(0, p.logits)
}

func (p *plainStepper) next() ([]int32, error) { return p.first() }

func (p *plainStepper) finish(kept int) (int, error) {
	if kept == 0 {
		return 0, nil
	}
	return 1, p.sess.Decode(p.one, LogitsLast)
}
