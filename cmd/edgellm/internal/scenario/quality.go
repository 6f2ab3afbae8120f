package scenario

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/logitlog"
	"github.com/edgellm/edgellm/internal/sample"
)

// Quality compares what a policy's run sampled from with the highest tier on
// the same tokens: the runner teacher-forces the run's prompt and tokens
// through tier 0 (outside any cgroup, after the run) with the engine's own
// settings and decode schedule, so a run that stayed on tier 0 measures 0.
type Quality struct {
	Reference string `json:"reference"` // the tier-0 file
	Tokens    int    `json:"tokens"`    // generated tokens compared
	// MeanKL and MaxKL are KL(tier 0 ‖ run) over those tokens, in nats.
	MeanKL float64 `json:"mean_kl"`
	MaxKL  float64 `json:"max_kl"`
	// Top1Agreement is the share of tokens where the run's most likely
	// token is tier 0's.
	Top1Agreement float64 `json:"top1_agreement"`
	// Truncated: the run was killed while writing a record (dropped).
	Truncated bool `json:"truncated,omitempty"`
}

// measureQuality reads the run's logits file and compares it with tier 0.
// It fills the per-token KL of res.Timeline (token i ↔ record i).
func (r *runner) measureQuality(ctx context.Context, logitsPath string, res *PolicyResult) (*Quality, error) {
	lg, err := logitlog.Read(logitsPath)
	if err != nil {
		return nil, err
	}
	q := &Quality{Reference: r.tiers[0].Path, Tokens: len(lg.Tokens), Truncated: lg.Truncated}
	if len(lg.Tokens) == 0 {
		return q, nil
	}
	// The same engine as the runs (native and llamacpp agree bit for bit
	// on these models: internal/native's parity tests).
	e, err := host.Load(r.tiers[0].Path, host.LoadOptions{Engine: r.s.Engine})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if nv := e.Info().NVocab; nv != lg.NVocab {
		return nil, fmt.Errorf("%s: vocabulary %d, the run's logits have %d", r.tiers[0].Path, nv, lg.NVocab)
	}
	sess, err := e.NewSession(engine.SessionConfig{NCtx: r.s.Ctx, Threads: r.s.Threads})
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	ref := make([]float32, lg.NVocab)
	one := make([]int32, 1)
	if err := sess.Decode(lg.Prompt, engine.LogitsLast); err != nil {
		return nil, fmt.Errorf("reference prefill: %w", err)
	}
	var sum float64
	agree := 0
	for i := range lg.Tokens {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if i > 0 {
			one[0] = lg.Tokens[i-1]
			if err := sess.Decode(one, engine.LogitsLast); err != nil {
				return nil, fmt.Errorf("reference decode at token %d: %w", i, err)
			}
		}
		at := 0 // a one-token batch
		if i == 0 {
			at = len(lg.Prompt) - 1 // the prefill's last position
		}
		if err := sess.Logits(at, ref); err != nil {
			return nil, err
		}
		kl := sample.KL(ref, lg.Logits[i])
		sum += kl
		q.MaxKL = math.Max(q.MaxKL, kl)
		if top1(ref) == top1(lg.Logits[i]) {
			agree++
		}
		if i < len(res.Timeline) && res.Timeline[i].I == i {
			res.Timeline[i].KL = kl
		}
	}
	q.MeanKL = sum / float64(len(lg.Tokens))
	q.Top1Agreement = float64(agree) / float64(len(lg.Tokens))
	return q, nil
}

// top1 is the greedy token of logits: the first index of the largest value,
// as kernels.Argmax picks it (the harness reaches no kernel for it).
func top1(logits []float32) int { return slices.Index(logits, slices.Max(logits)) }
