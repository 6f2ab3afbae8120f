package host

import (
	"errors"
	"fmt"
	"time"

	"github.com/edgellm/edgellm/abi"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/native"
)

// Speculative decoding (native engine): a cheap draft proposes up to K
// tokens, the session's model verifies them in one batch and keeps the
// longest prefix its own sampler agrees with (rejection sampling: the
// output distribution is the model's own, greedy output is identical). The
// Draft owns the sampler, so it both prefills (Start) and generates (Step).

// ErrDraftEngine is returned (wrapped) by AttachDraft for an engine or
// session that cannot decode speculatively (only the native engine can).
var ErrDraftEngine = errors.New("speculative decoding needs the native engine")

// ErrDraftSpec is returned (wrapped) by AttachDraft for a draft spec that
// does not parse.
var ErrDraftSpec = errors.New("bad draft spec")

// DraftOptions configures AttachDraft.
type DraftOptions struct {
	// Spec names the draft: "skip:N" (the model's first N layers, then its
	// final norm and head; shares the session's KV), "self:TYPE" (a
	// LoadOptions.LayerSets weight set of that type, e.g. "self:q4_0"),
	// "ngram" (prompt lookup) or the path of a smaller GGUF model with the
	// same vocabulary (loaded by AttachDraft, its KV beside the session's).
	Spec string
	// K is the number of draft tokens per round, clamped to 0..abi.MaxSpecK
	// (0: plain steps).
	K int
	// Auto lets the Draft choose K before each round from its own
	// measurements (acceptance, draft and verify costs). Ignored with
	// Policy.
	Auto bool
	// Sampling is the sampler of the generation (the Draft owns it; a
	// fixed seed reproduces the output).
	Sampling SamplingParams
	// Policy, if set, drives the Draft (ABI 1.1): K, p_min, draft threads
	// and CPU masks are its decisions, and its speculation sensors are the
	// Draft's measurements.
	Policy *Adapter
	// Clock, if set, measures draft and verify steps instead of wall time
	// (e.g. the thread's CPU time at one thread).
	Clock func() time.Duration
}

// DraftStats count what speculative decoding did.
type DraftStats = engine.DraftStats

// DraftStepTimes are the smoothed step times the Draft measured: a draft
// step, and a verify batch of n = i+1 tokens (Verify[0] is a plain step);
// 0 = not measured.
type DraftStepTimes struct {
	Draft  time.Duration
	Verify [abi.MaxSpecK + 1]time.Duration
}

// Draft is speculative decoding attached to one Session. Not safe for
// concurrent use; close it before its Session (and before the Adapter
// that drives it, if any).
type Draft struct {
	sp   *native.Speculator
	sess *native.Session
	de   *native.Engine // a draft model AttachDraft loaded; closed with the Draft
	spec string         // the spec in canonical form
}

// DraftModelPath is the model file a draft spec names ("" for skip:N,
// self:TYPE and ngram, which run on the target's own weights, and for a
// spec that does not parse: AttachDraft reports that).
func DraftModelPath(spec string) string {
	s, err := native.ParseDraftSpec(spec)
	if err != nil || s.Kind != native.DraftModel {
		return ""
	}
	return s.Path
}

// AttachDraft attaches a draft to sess, a session of eng (Start, or
// Generate with the Draft, prefills the prompt). A session with a Draft is
// a conversation: Generate calls with the Draft continue it. skip:N,
// self:TYPE and ngram drafts attach at any point of a conversation (one
// Draft per call works: attach, Generate, Close); a draft model decodes
// the whole conversation and attaches only to a session that has decoded
// nothing. Errors wrap ErrDraftEngine for
// an engine other than the native one and ErrDraftSpec for a spec that
// does not parse; a draft the model cannot run (skip:N with N ≥ its layers,
// self:TYPE without that weight set, a draft model with another
// vocabulary) is a one-line error naming it.
func AttachDraft(eng Engine, sess Session, o DraftOptions) (*Draft, error) {
	ne, ok1 := eng.(*native.Engine)
	ns := native.SessionOf(sess)
	if !ok1 || ns == nil {
		return nil, fmt.Errorf("%w (this model runs on %s)", ErrDraftEngine, eng.Name())
	}
	spec, err := native.ParseDraftSpec(o.Spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDraftSpec, err)
	}
	d := &Draft{sess: ns, spec: spec.String()}
	if spec.Kind == native.DraftModel {
		if d.de, err = native.LoadDraft(spec.Path, ne); err != nil {
			return nil, err
		}
		spec.Eng = d.de
	}
	if d.sp, err = native.NewSpeculator(ns, spec, o.Sampling, o.K); err != nil {
		d.Close()
		return nil, err
	}
	if o.Clock != nil {
		d.sp.SetClock(o.Clock)
	}
	d.sp.SetAuto(o.Auto && o.Policy == nil)
	if o.Policy != nil {
		o.Policy.attachSpeculation(d.sp)
		o.Policy.draft, o.Policy.haveCan = d, false // ABI 1.6: the policy may detach and attach it
	}
	return d, nil
}

// Close releases the draft (its thread pools, a draft model it loaded),
// not the session.
func (d *Draft) Close() error {
	var err error
	if d.sp != nil {
		err = d.sp.Close()
		d.sp = nil
	}
	if d.de != nil {
		err = errors.Join(err, d.de.Close())
		d.de = nil
	}
	return err
}

// Start prefills prompt into the session (the conversation's next tokens
// after a Finish) and returns the first token (sampled, not yet decoded).
// Then call Step until done, and Finish. Generate with the Draft does all
// three.
func (d *Draft) Start(prompt []int32) (int32, error) { return d.sp.Start(prompt) }

// Finish ends a generation driven by Start and Step: of the tokens the
// last Start or Step returned, the caller kept the first kept; the session
// is rolled back over the others and the last kept token is decoded, so it
// holds the whole conversation and Start can continue it.
func (d *Draft) Finish(kept int) error {
	_, err := d.sp.Finish(kept)
	return err
}

// Step runs one round (draft K tokens, verify them in one batch, keep the
// accepted prefix and the model's own next token) and returns the tokens it
// generated, at least one. The slice is reused by the next Step.
func (d *Draft) Step() ([]int32, error) { return d.sp.Step() }

// K is the number of draft tokens per round in force.
func (d *Draft) K() int { return d.sp.K() }

// SetK sets K from the next round on, clamped to 0..abi.MaxSpecK, and returns
// the K in force.
func (d *Draft) SetK(k int) int { return d.sp.SetK(k) }

// String is the draft's spec (canonical form: "skip:3", "self:q4_0", ...).
func (d *Draft) String() string { return d.spec }

// Stats returns the counters so far.
func (d *Draft) Stats() DraftStats { return d.sp.Stats() }

// StepTimes returns the smoothed step times measured so far.
func (d *Draft) StepTimes() DraftStepTimes { return DraftStepTimes(d.sp.StepTimes()) }

// KVBytes is the KV memory the draft adds to the session's arena (0 for
// skip, self and ngram drafts, which share the session's KV).
func (d *Draft) KVBytes() int64 { return d.sp.DraftKVBytes() }

// ComputeBytes is the compute (activation) memory the draft adds beside
// the session's: its graphs' buffers (verify batches of each size used, the
// draft's own passes or model).
func (d *Draft) ComputeBytes() int64 { return d.sp.ComputeBytes() }

// ArenaBytes is the session's whole KV arena, the draft's part included.
func (d *Draft) ArenaBytes() int64 { return d.sess.KV().Bytes() }
