package calib

import (
	"errors"
	"fmt"
	"math"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/sample"
)

// MinScored is the fewest scored positions a text must give: below it the
// per-layer KLs are too noisy to rank layers.
const MinScored = 64

// ErrTextTooShort: the text gives fewer than MinScored scored positions.
var ErrTextTooShort = errors.New("text too short to calibrate on")

// Runner teacher-forces a token sequence through one native session in
// chunks of at most Chunk tokens (each chunk from position 0, so no chunk
// exceeds the session's context). Within a chunk, the logits at position i
// predict token i+1; the last token of each chunk is not scored.
type Runner struct {
	Sess   *native.Session
	Tokens []int32
	Chunk  int
	NBatch int

	logits []float32
}

// NewRunner opens a session on eng (F32 KV, so only the weights differ
// between runs) sized for chunks of min(chunk, n_ctx_train) tokens.
func NewRunner(eng *native.Engine, tokens []int32, chunk, threads int) (*Runner, error) {
	cfg := eng.Config()
	if chunk <= 0 {
		chunk = 512
	}
	chunk = min(chunk, cfg.NCtxTrain)
	nb := min(chunk, 512)
	s, err := eng.NewSession(engine.SessionConfig{NCtx: chunk, NBatch: nb, Threads: threads, KVType: engine.KVF32})
	if err != nil {
		return nil, err
	}
	r := &Runner{Sess: native.SessionOf(s), Tokens: tokens, Chunk: chunk, NBatch: nb, logits: make([]float32, cfg.NVocab)}
	if n := r.Scored(); n < MinScored {
		s.Close()
		return nil, fmt.Errorf("%w: %d tokens give %d scored positions, want ≥ %d", ErrTextTooShort, len(tokens), n, MinScored)
	}
	return r, nil
}

// Close closes the session.
func (r *Runner) Close() error { return r.Sess.Close() }

// Scored is the number of positions that get a score.
func (r *Runner) Scored() int {
	n := 0
	for c0 := 0; c0 < len(r.Tokens); c0 += r.Chunk {
		n += max(0, min(r.Chunk, len(r.Tokens)-c0)-1)
	}
	return n
}

// Run teacher-forces the tokens with the session's current weight sets and
// calls fn(k, logits, next) for the k-th scored position.
func (r *Runner) Run(fn func(k int, logits []float32, next int32)) error {
	k := 0
	for c0 := 0; c0 < len(r.Tokens); c0 += r.Chunk {
		chunk := r.Tokens[c0:min(c0+r.Chunk, len(r.Tokens))]
		if err := r.Sess.Truncate(0); err != nil {
			return err
		}
		for b0 := 0; b0 < len(chunk); b0 += r.NBatch {
			batch := chunk[b0:min(b0+r.NBatch, len(chunk))]
			if err := r.Sess.Decode(batch, engine.LogitsAll); err != nil {
				return err
			}
			for i := range batch {
				p := b0 + i
				if p+1 >= len(chunk) {
					break
				}
				if err := r.Sess.Logits(i, r.logits); err != nil {
					return err
				}
				fn(k, r.logits, chunk[p+1])
				k++
			}
		}
	}
	return nil
}

// Reference holds the base run's log-probabilities at every scored position.
type Reference struct {
	logp [][]float32 // log-softmax of the base logits
	NLL  float64     // mean negative log-likelihood of the next token
}

// PPL is the base perplexity.
func (ref *Reference) PPL() float64 { return math.Exp(ref.NLL) }

// NewReference runs the session as it is (the base assignment).
func (r *Runner) NewReference() (*Reference, error) {
	ref := &Reference{logp: make([][]float32, r.Scored())}
	var nll float64
	err := r.Run(func(k int, logits []float32, next int32) {
		lse := sample.LogSumExp(logits)
		lp := make([]float32, len(logits))
		for j, v := range logits {
			lp[j] = float32(float64(v) - lse)
		}
		ref.logp[k] = lp
		nll -= float64(lp[next])
	})
	if err != nil {
		return nil, err
	}
	ref.NLL = nll / float64(len(ref.logp))
	return ref, nil
}

// BlockLen is how many consecutive scored positions make one block of
// Score.Blocks: the unit the proof's bootstrap resamples (positions next to
// each other are correlated; blocks of 32 much less so).
const BlockLen = 32

// Score is one run against the reference.
type Score struct {
	KL  float64 `json:"kl"`  // mean KL(base ‖ run) per scored position, nats
	NLL float64 `json:"nll"` // mean negative log-likelihood
	PPL float64 `json:"ppl"`
	// Blocks is the KL summed over each run of BlockLen scored positions
	// (the last block holds the remainder; NBlocks gives the count).
	Blocks []float64 `json:"-"`
}

// NBlocks is how many blocks n scored positions make: full blocks of
// BlockLen, a remainder of at least BlockLen/2 its own block, a shorter one
// merged into the block before it.
func NBlocks(n int) int {
	b := n / BlockLen
	if b == 0 || n%BlockLen >= BlockLen/2 {
		b++
	}
	return b
}

// blockOf is the block of scored position k of n.
func blockOf(k, n int) int { return min(k/BlockLen, NBlocks(n)-1) }

// BlockSizes is how many scored positions each block of n holds.
func BlockSizes(n int) []float64 {
	out := make([]float64, NBlocks(n))
	for k := range n {
		out[blockOf(k, n)]++
	}
	return out
}

// Score runs the session with its current weight sets against ref.
func (r *Runner) Score(ref *Reference) (Score, error) {
	var kl, nll float64
	n := len(ref.logp)
	blocks := make([]float64, NBlocks(n))
	err := r.Run(func(k int, logits []float32, next int32) {
		lse := sample.LogSumExp(logits)
		p := ref.logp[k]
		var d float64
		for j, v := range logits {
			a := float64(p[j])
			d += math.Exp(a) * (a - (float64(v) - lse))
		}
		kl += max(d, 0)
		blocks[blockOf(k, n)] += max(d, 0)
		nll -= float64(logits[next]) - lse
	})
	if err != nil {
		return Score{}, err
	}
	fn := float64(n)
	return Score{KL: kl / fn, NLL: nll / fn, PPL: math.Exp(nll / fn), Blocks: blocks}, nil
}
