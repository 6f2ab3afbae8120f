package native

import (
	"errors"
	"fmt"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sample"
)

// Speculative decoding (Leviathan et al., Chen et al.; llama.cpp's
// common/speculative.cpp): a cheap draft proposes up to K tokens, the
// target evaluates [last, d1..dK] in one batch with logits on every row,
// the drafts are accepted by rejection sampling over the distributions
// after the same sampler transforms on both sides (internal/sample), and
// the session is truncated back over the rejected positions. Drafts
// (draft.go, draftmodel.go) share the session's KV: skip:N and self:TYPE
// write provisional rows in place that the verify batch overwrites; a
// separate draft model keeps its KV in the same memfd as the target's.
//
// Rollback is Session.Truncate: O(1) without a window, O(rejected) head
// moves with one. A provisional token never evicts a position a rejection
// needs back: Decode refuses a batch that does not fit a ring beside its
// window (window + batch ≤ ring), so the slots the K+1 provisional tokens
// take held positions already outside the window of every later query.

// MaxSpecK is the largest K a Speculator accepts (abi.MaxSpecK).
const MaxSpecK = abi.MaxSpecK

// SpecStats counts what speculative decoding did (the public type, so go
// doc shows its fields).
type SpecStats = engine.DraftStats

// Speculator generates tokens on a Session with speculative decoding. It
// owns the sampler (target transforms and the seeded random stream: a fixed
// seed reproduces the output). Not safe for concurrent use; close it
// before its Session.
type Speculator struct {
	s     *Session
	d     drafter
	spec  DraftSpec
	smp   *sample.Sampler // target transforms + the random stream
	dsmp  *sample.Sampler // draft transforms (same parameters, history via extra)
	rej   *sample.Rejector
	k     int
	pMin  float32
	greed bool

	hist    []int32 // every token since base; the session holds all but the last
	base    int     // positions the session held when the draft was attached
	drafts  []int32
	q       []sample.Dist // draft distributions (sampling with a model draft)
	qPoint  bool          // the drafts are point masses (greedy or n-gram)
	p       sample.Dist
	logits  []float32
	dlogits []float32
	out     []int32
	batch   []int32     // the verify batch (scratch)
	one     [1]int32    // a draft's one-token batch (scratch)
	graphs  shapeGraphs // the verify batches' graphs (specgraphs.go)
	stats   SpecStats
	meter   specMeter
	auto    bool // choose K each round from the measurements (SetAuto)
	// draftPool and verifyPool are the draft's and the target's own
	// threadpools (specthreads.go), nil = the session's.
	draftPool, verifyPool *pool
	steps                 int                  // Step calls
	measure               bool                 // take a plain step now and then to keep v(1) measured (SetMeasure)
	clock                 func() time.Duration // the measuring clock (SetClock); nil = wall time
}

// SetAuto makes the Speculator choose K itself before each round: the K
// that maximises the expected tokens per unit of time from its own
// measurements (SpecSensors.BestK), 0 when speculation does not pay or
// when the rounds at that K delivered fewer tokens per unit of time than
// plain steps, with probe rounds and plain steps that keep the
// measurements fresh (specauto.go).
func (sp *Speculator) SetAuto(on bool) {
	sp.auto = on
	if on {
		sp.prepare(MaxSpecK)
	}
}

// SetMeasure makes every 64th round (and the first two: the first pays for
// warm-up, the second replaces it) a plain step, so the costs relative to
// one plain target step stay measured while K > 0 (for a policy reading
// the sensors). Auto mode measures on its own.
func (sp *Speculator) SetMeasure(on bool) { sp.measure = on }

// NewSpeculator attaches a draft to s: Start (or Prefill) decodes the
// prompt, the conversation's next tokens on a session that has decoded
// before. A draft model needs every token of the conversation, so it
// attaches only to an empty session; skip:N, self:TYPE and ngram drafts
// attach at any point (an ngram draft then looks up the tokens from there
// on). K starts at k (clamped to 1..MaxSpecK; 0 = plain steps until SetK).
func NewSpeculator(s *Session, spec DraftSpec, p sample.Params, k int) (*Speculator, error) {
	if s.kv == nil {
		return nil, ErrClosed
	}
	if s.n != 0 && spec.Kind == DraftModel {
		return nil, fmt.Errorf("native: a draft model starts on an empty session (Len %d): it decodes the whole conversation", s.n)
	}
	nv := s.cfg.NVocab
	smp, err := sample.New(p, nv)
	if err != nil {
		return nil, err
	}
	dsmp, _ := sample.New(p, nv)
	sp := &Speculator{s: s, base: s.n, spec: spec, smp: smp, dsmp: dsmp, rej: sample.NewRejector(nv), greed: p.Greedy(),
		logits: make([]float32, nv), dlogits: make([]float32, nv), q: make([]sample.Dist, MaxSpecK),
		hist: make([]int32, 0, s.nCtx), drafts: make([]int32, 0, MaxSpecK), out: make([]int32, 0, MaxSpecK+1),
		batch: make([]int32, 0, MaxSpecK+1)}
	if sp.d, err = s.newDrafter(spec); err != nil {
		return nil, err
	}
	if p := s.eng.opts.SynthAgree; p > 0 {
		sp.d = &synthMiss{drafter: sp.d, p: p, nVocab: int32(nv)}
	}
	sp.SetK(k)
	return sp, nil
}

// SetK sets the draft length from the next round on, clamped to
// [0, MaxSpecK]; it returns the K in force (0 = plain steps).
func (sp *Speculator) SetK(k int) int {
	sp.k = max(0, min(k, MaxSpecK))
	sp.prepare(sp.k)
	return sp.k
}

// prepare builds the verify graphs of every batch size up to k+1 now, so
// no round allocates later (a draft's length varies round by round: an
// n-gram draft's with its matches, any draft's near the context's end).
// A failure here is not reported: the round that needs the graph builds
// it and reports it then.
func (sp *Speculator) prepare(k int) {
	if sp.s.kv != nil {
		_ = sp.graphs.prepare(sp.s, k+1)
	}
}

// K is the draft length in force.
func (sp *Speculator) K() int { return sp.k }

// SetPMin stops drafting within a round when the draft's top probability
// is below p (0 = never).
func (sp *Speculator) SetPMin(p float32) { sp.pMin = p }

// Stats returns the counters.
func (sp *Speculator) Stats() SpecStats { return sp.stats }

// DraftKVBytes is the KV memory the draft adds to the session's arena (0
// for skip, self and ngram drafts).
func (sp *Speculator) DraftKVBytes() int64 { return sp.d.kvBytes() }

// Close releases the draft's resources (not the session).
func (sp *Speculator) Close() error {
	if sp.d == nil {
		return nil
	}
	if md, ok := sp.d.(*modelDrafter); ok && sp.draftPool != nil {
		md.s.be.SetThreadpool(md.s.tp, 0)
	}
	sp.closePools()
	err := sp.d.close()
	if e := sp.graphs.close(); err == nil {
		err = e
	}
	sp.d = nil
	return err
}

// Start prefills prompt and returns the first token (sampled, not yet
// decoded): Prefill then First. Then call Step until done, and Finish.
func (sp *Speculator) Start(prompt []int32) (int32, error) {
	if err := sp.Prefill(prompt); err != nil {
		return 0, err
	}
	return sp.First()
}

// Prefill decodes prompt into the session: the whole prompt on a new
// session, the conversation's next tokens after a Finish. The session must
// hold exactly the tokens the Speculator committed (nothing decoded beside
// it). The samplers start afresh with prompt as their history, as a plain
// generation call's sampler does, so that a conversation continued with a
// draft draws what plain generation would.
func (sp *Speculator) Prefill(prompt []int32) error {
	s := sp.s
	switch {
	case sp.d == nil:
		return ErrClosed
	case len(prompt) == 0:
		return errors.New("native: empty prompt")
	case s.n != sp.base+len(sp.hist):
		return fmt.Errorf("native: the session holds %d tokens, the draft's conversation %d (decoded beside the draft, or not finished)", s.n, sp.base+len(sp.hist))
	}
	for i := 0; i < len(prompt); i += s.nBatch {
		if err := s.Decode(prompt[i:min(len(prompt), i+s.nBatch)], engine.LogitsLast); err != nil {
			return err
		}
	}
	if err := s.Logits(s.lastN-1, sp.logits); err != nil {
		return err
	}
	if len(sp.hist) > 0 { // a continuation: fresh samplers, as plain generation
		p := sp.smp.Params()
		sp.smp, _ = sample.New(p, s.cfg.NVocab)
		sp.dsmp, _ = sample.New(p, s.cfg.NVocab)
	}
	for _, t := range prompt {
		sp.smp.Accept(t)
		sp.dsmp.Accept(t)
	}
	sp.hist = append(sp.hist, prompt...)
	sp.out = sp.out[:0]
	return nil
}

// First samples the first token after Prefill (not yet decoded).
func (sp *Speculator) First() (int32, error) {
	tok, err := sp.draw(sp.logits, nil)
	if err != nil {
		return 0, err
	}
	sp.commit(tok)
	sp.out = append(sp.out[:0], tok)
	sp.stats.Emitted++
	return tok, nil
}

// Finish ends a generation call: of the tokens the last First or Step
// returned, the caller kept the first kept (the rest were not emitted: the
// call's token budget or an end-of-generation token came first). The
// session is rolled back over the others and the last kept token is
// decoded, so the session holds every kept token: the conversation can
// continue with Prefill. It returns how many tokens it decoded (0 or 1).
func (sp *Speculator) Finish(kept int) (int, error) {
	s := sp.s
	if sp.d == nil {
		return 0, ErrClosed
	}
	kept = max(0, min(kept, len(sp.out)))
	h := len(sp.hist) - len(sp.out) + kept
	n := sp.base + h
	sp.stats.Emitted -= len(sp.out) - kept
	sp.hist, sp.out = sp.hist[:h], sp.out[:0]
	dec := 0
	switch {
	case s.n > n:
		if err := s.Truncate(n); err != nil {
			return 0, err
		}
	case s.n < n:
		for s.n < n {
			c := sp.hist[s.n-sp.base : min(n, s.n+s.nBatch)-sp.base]
			if err := s.Decode(c, engine.LogitsLast); err != nil {
				return dec, err
			}
			dec += len(c)
		}
	}
	return dec, sp.d.sync(sp)
}

// draw samples a target token from logits after the history + extra.
func (sp *Speculator) draw(logits []float32, extra []int32) (int32, error) {
	if err := sp.smp.Dist(logits, extra, &sp.p); err != nil {
		return 0, err
	}
	if sp.greed {
		t, _ := sp.p.Top()
		return t, nil
	}
	return sp.smp.DrawAt(&sp.p, len(extra)), nil
}

func (sp *Speculator) commit(tok int32) {
	sp.hist = append(sp.hist, tok)
	sp.smp.Accept(tok)
	sp.dsmp.Accept(tok)
}

// room is the largest verify batch that fits the context and every ring.
func (sp *Speculator) room() int {
	s := sp.s
	r := s.nBatch
	if s.ctxBound() {
		r = min(r, s.nCtx-s.n)
	}
	for _, rg := range s.rings {
		if rg.window > 0 {
			r = min(r, rg.end-s.anchors-rg.window)
		}
	}
	return r
}

// Step runs one round: draft, verify, accept, roll back. It returns the
// tokens emitted (at least one; the slice is reused by the next Step).
// The session then holds every token but the last emitted one.
func (sp *Speculator) Step() ([]int32, error) {
	s := sp.s
	if sp.d == nil {
		return nil, ErrClosed
	}
	n := s.n
	last := sp.hist[len(sp.hist)-1]
	sp.steps++
	rs := sp.now()
	k := sp.k
	if sp.auto {
		sp.k, k = sp.meter.nextK(sp.steps)
	}
	if sp.measure && sp.k > 0 && (sp.meter.nVer[0] < 2 || sp.steps%64 == 0) {
		k = 0 // a plain step keeps v(1), the unit of the costs, measured
	}
	if r := sp.room() - 1; k > r {
		k = max(0, r)
		sp.stats.Clamped++
	}
	sp.drafts, sp.qPoint = sp.drafts[:0], true
	if k > 0 {
		t0, steps := sp.now(), sp.stats.DraftSteps
		if err := sp.d.draft(sp, k); err != nil {
			return nil, fmt.Errorf("native: draft: %w", err)
		}
		d := sp.now() - t0
		sp.stats.DraftTime += d
		sp.meter.draftSteps(sp.stats.DraftSteps-steps, d)
	}
	sp.out = sp.out[:0]
	t0 := sp.now()
	defer func() { sp.stats.VerifyTime += sp.now() - t0 }()
	if s.n != n {
		if err := s.Truncate(n); err != nil {
			return nil, err
		}
	}
	nd := len(sp.drafts)
	if nd == 0 {
		sp.stats.PlainSteps++
		tv := sp.now()
		sp.batch = append(sp.batch[:0], last)
		if err := s.Decode(sp.batch, engine.LogitsLast); err != nil {
			return nil, err
		}
		sp.meter.round(0, 0, sp.now()-tv)
		if err := s.Logits(0, sp.logits); err != nil {
			return nil, err
		}
		tok, err := sp.draw(sp.logits, nil)
		if err != nil {
			return nil, err
		}
		sp.commit(tok)
		sp.out = append(sp.out, tok)
		sp.stats.Emitted++
		return sp.roundDone(0, rs)
	}
	sp.batch = append(append(sp.batch[:0], last), sp.drafts...)
	tv := sp.now()
	if err := sp.graphs.decode(s, sp.batch, engine.LogitsAll); err != nil {
		return nil, err
	}
	dv := sp.now() - tv
	sp.stats.Rounds++
	sp.stats.Drafted += nd
	j := 0
	var tok int32
	for ; j <= nd; j++ {
		if err := s.Logits(j, sp.logits); err != nil {
			return nil, err
		}
		if err := sp.smp.Dist(sp.logits, sp.drafts[:j], &sp.p); err != nil {
			return nil, err
		}
		if j == nd { // every draft accepted: the bonus token
			tok = sp.pick()
			break
		}
		x := sp.drafts[j]
		sp.stats.DraftedAt[j]++
		if sp.greed {
			if t, _ := sp.p.Top(); t != x {
				tok = t
				break
			}
		} else if y := sp.smp.DrawAt(&sp.p, j); y != x {
			// Coupled with the draft's proposal by the position's noise
			// (internal/sample keyed.go): y is the token plain sampling
			// draws here; x was accepted only if it is y.
			tok = y
			break
		}
		sp.stats.AcceptedAt[j]++
		sp.stats.Accepted++
	}
	sp.meter.round(nd, j, dv)
	if err := s.Truncate(n + j + 1); err != nil {
		return nil, err
	}
	for _, t := range sp.drafts[:j] {
		sp.commit(t)
		sp.out = append(sp.out, t)
	}
	sp.commit(tok)
	sp.out = append(sp.out, tok)
	sp.stats.Emitted += len(sp.out)
	return sp.roundDone(nd, rs)
}

// roundDone syncs the draft and records the whole round (started at rs,
// nd tokens drafted) for auto K.
func (sp *Speculator) roundDone(nd int, rs time.Duration) ([]int32, error) {
	if err := sp.d.sync(sp); err != nil {
		return nil, err
	}
	sp.meter.roundDone(nd, len(sp.out), sp.now()-rs)
	return sp.out, nil
}

// pick draws from sp.p (greedy: its top).
func (sp *Speculator) pick() int32 {
	if sp.greed {
		t, _ := sp.p.Top()
		return t
	}
	return sp.smp.DrawAt(&sp.p, len(sp.drafts))
}

// Hist is every token so far (prompt and generated).
func (sp *Speculator) Hist() []int32 { return sp.hist }

// proposeFrom turns the draft's logits for draft position i into a
// proposal: greedy takes the argmax, sampling draws from the draft's
// distribution (kept for the acceptance test). ok is false when the
// draft's confidence is below p_min: the round stops drafting.
func (sp *Speculator) proposeFrom(logits []float32, i int) (int32, bool, error) {
	if sp.greed {
		if err := sp.dsmp.Dist(logits, sp.drafts, &sp.q[i]); err != nil {
			return 0, false, err
		}
		t, _ := sp.q[i].Top()
		if sp.pMin > 0 && sample.TopProb(logits) < sp.pMin {
			return t, false, nil
		}
		return t, true, nil
	}
	sp.qPoint = false
	q := &sp.q[i]
	if err := sp.dsmp.Dist(logits, sp.drafts, q); err != nil {
		return 0, false, err
	}
	if _, top := q.Top(); sp.pMin > 0 && top < sp.pMin {
		return 0, false, nil
	}
	return sp.smp.DrawAt(q, i), true, nil
}
