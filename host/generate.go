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
	// this session, which must not have decoded anything yet; a Draft is
	// one call, not a conversation: its last token is not decoded): the Draft's
	// own sampler (DraftOptions.Sampling) replaces Sampling, BeforeStep runs
	// before each round, and the Stats' decode figures count rounds after
	// the first.
	Draft *Draft
}

// Stats are the timings of one Generate call. Decode throughput is steady
// state: the first decode step is excluded.
type Stats struct {
	PromptTokens    int
	GeneratedTokens int
	Prefill         time.Duration
	// Decode is the time of decode steps 2..n (steady state); DecodeTokens
	// counts them.
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
// when Emit's error stopped it), so a later call continues from it exactly
// as one prompt holding the whole conversation would. BeforeStep may
// change the session's engine state between steps (a tier swap keeps the
// same Session value). Nothing is allocated per token.
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
	if opts.Draft != nil {
		return generateDraft(ctx, sess, vocab, opts, emit)
	}
	smp, err := sample.New(resolveSampling(opts.Sampling), vocab.NVocab())
	if err != nil {
		return st, fmt.Errorf("GenerateOptions.Sampling: %w", err)
	}
	logits := make([]float32, vocab.NVocab())
	one := make([]int32, 1)
	for _, t := range prompt {
		smp.Accept(t)
	}

	cpu := opts.MeasureCPU
	done, err := beginGeneration(opts)
	if err != nil {
		return st, err
	}
	defer done()

	// prefill
	start, c0 := time.Now(), threadCPU(cpu)
	if err := sess.Decode(prompt, LogitsLast); err != nil {
		return st, fmt.Errorf("prefill of %d tokens: %w", len(prompt), err)
	}
	if err := sess.Logits(len(prompt)-1, logits); err != nil {
		return st, err
	}
	st.PromptTokens = len(prompt)
	st.Prefill, st.PrefillCPU = time.Since(start), threadCPU(cpu)-c0

	// decode: sample a token, emit it, decode it (so that it is in the KV
	// cache, the last one included), repeat
	var spanStart time.Time
	var proc0 time.Duration
	for i := 0; i < opts.NPredict; i++ {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if opts.OnLogits != nil {
			if err := opts.OnLogits(i, logits); err != nil {
				return st, err
			}
		}
		tok, err := smp.Sample(logits)
		if err != nil {
			return st, err
		}
		if i == 0 {
			st.FirstToken = time.Since(start)
		}
		if !opts.IgnoreEOG && vocab.IsEOG(tok) {
			st.StoppedAtEOG = true
			break
		}
		smp.Accept(tok)
		st.GeneratedTokens++
		one[0] = tok
		if err := emit(tok); err != nil {
			// The token was emitted: keep it in the conversation.
			if derr := sess.Decode(one, LogitsLast); derr != nil {
				return st, errors.Join(err, fmt.Errorf("decode at position %d: %w", sess.Len(), derr))
			}
			return st, err
		}
		if opts.BeforeStep != nil {
			if err := opts.BeforeStep(i + 1); err != nil {
				return st, err
			}
		}
		if cpu && i == 1 {
			spanStart, proc0 = time.Now(), cputime.Process()
		}
		t0, c0 := time.Now(), threadCPU(cpu)
		if err := sess.Decode(one, LogitsLast); err != nil {
			return st, fmt.Errorf("decode at position %d: %w", sess.Len(), err)
		}
		if err := sess.Logits(0, logits); err != nil {
			return st, err
		}
		if i == 0 {
			continue // the first decode step is warm-up: not timed
		}
		st.Decode += time.Since(t0)
		st.DecodeCPU += threadCPU(cpu) - c0
		st.DecodeTokens++
	}
	if cpu && !spanStart.IsZero() {
		st.DecodeSpan, st.DecodeProcCPU = time.Since(spanStart), cputime.Process()-proc0
	}
	return st, nil
}
