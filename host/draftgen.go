package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgellm/edgellm/internal/cputime"
)

// generateDraft is Generate with GenerateOptions.Draft: the Draft prefills
// the prompt, samples, and generates a round of tokens per Step; Generate
// emits them in order and stops at NPredict or an end-of-generation token
// (the rest of a round is dropped, as Step's slice is reused). Stats count
// rounds where plain generation counts steps: the first round is warm-up,
// not timed.
func generateDraft(ctx context.Context, sess Session, vocab Vocab, opts GenerateOptions, emit func(int32) error) (Stats, error) {
	var st Stats
	d := opts.Draft
	switch {
	case d.sp == nil:
		return st, errors.New("GenerateOptions.Draft is closed")
	case !sessionIs(sess, d.sess):
		return st, errors.New("GenerateOptions.Draft is attached to another session")
	case opts.OnLogits != nil:
		return st, errors.New("GenerateOptions.OnLogits with a Draft: speculative rounds sample inside the Draft")
	}
	cpu := opts.MeasureCPU
	done, err := beginGeneration(opts)
	if err != nil {
		return st, err
	}
	defer done()

	// prefill and the first token
	start, c0 := time.Now(), threadCPU(cpu)
	first, err := d.Start(opts.Prompt)
	if err != nil {
		return st, fmt.Errorf("prefill of %d tokens: %w", len(opts.Prompt), err)
	}
	st.PromptTokens = len(opts.Prompt)
	st.Prefill, st.PrefillCPU = time.Since(start), threadCPU(cpu)-c0
	st.FirstToken = st.Prefill

	// rounds
	var one [1]int32
	one[0] = first
	toks := one[:]
	var spanStart time.Time
	var proc0 time.Duration
	for round := 0; ; round++ {
		for _, tok := range toks {
			if st.GeneratedTokens == opts.NPredict {
				break
			}
			if !opts.IgnoreEOG && vocab.IsEOG(tok) {
				st.StoppedAtEOG = true
				break
			}
			st.GeneratedTokens++
			if err := emit(tok); err != nil {
				return st, err
			}
		}
		if st.StoppedAtEOG || st.GeneratedTokens == opts.NPredict {
			break
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if opts.BeforeStep != nil {
			if err := opts.BeforeStep(st.GeneratedTokens); err != nil {
				return st, err
			}
		}
		if cpu && round == 1 {
			spanStart, proc0 = time.Now(), cputime.Process()
		}
		t0, c0 := time.Now(), threadCPU(cpu)
		if toks, err = d.Step(); err != nil {
			return st, fmt.Errorf("speculative round at position %d: %w", sess.Len(), err)
		}
		if round == 0 {
			continue // the first round is warm-up: not timed
		}
		st.Decode += time.Since(t0)
		st.DecodeCPU += threadCPU(cpu) - c0
		st.DecodeTokens += min(len(toks), opts.NPredict-st.GeneratedTokens)
	}
	if cpu && !spanStart.IsZero() {
		st.DecodeSpan, st.DecodeProcCPU = time.Since(spanStart), cputime.Process()-proc0
	}
	return st, nil
}
