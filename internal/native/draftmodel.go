package native

import (
	"fmt"

	"github.com/edgellm/edgellm/host/engine"
)

// A draft model: a separate smaller model with the target's vocabulary.
// Its KV lives in the target session's memfd: when the Speculator is
// created the session's (still empty) arena is replaced by one mapping
// sized for both models, the target's layers first, and the draft's
// session is created over the second part. The draft keeps its own
// positions: each round it first decodes the committed tokens it has not
// seen (the prompt, then the accepted tokens and the last one) in one
// batch, and after the round it is truncated to the tokens the target
// committed.

// LoadDraft maps the draft model at path for target: it must be a GGUF
// llama model with the same vocabulary size and tokenizer.
func LoadDraft(path string, target *Engine) (*Engine, error) {
	h, err := parseWeights(path)
	if err != nil {
		return nil, fmt.Errorf("native: draft %s: %w", path, err)
	}
	tc := &target.w.Config
	if h.cfg.NVocab != tc.NVocab {
		return nil, fmt.Errorf("native: draft %s has a vocabulary of %d tokens, the target %s has %d: a draft needs the target's vocabulary",
			path, h.cfg.NVocab, target.w.Path, tc.NVocab)
	}
	if err := sameVocab(target.w.File, h.f); err != nil {
		return nil, fmt.Errorf("native: draft %s does not tokenize as the target %s: %w", path, target.w.Path, err)
	}
	o := target.opts
	o.NoVocab, o.ExtraSets = true, nil
	return Load(path, o)
}

// modelDrafter drafts with a separate model's session.
type modelDrafter struct {
	s      *Session    // the draft model's session, over the target's memfd
	graphs shapeGraphs // its catch-up batches' graphs (specgraphs.go)
}

func (s *Session) newModelDrafter(spec DraftSpec) (*modelDrafter, error) {
	de := spec.Eng
	if de == nil {
		return nil, fmt.Errorf("native: draft %s: not loaded (LoadDraft)", spec.Path)
	}
	if de.w.Config.NVocab != s.cfg.NVocab {
		return nil, fmt.Errorf("native: draft %s has a vocabulary of %d tokens, the target has %d", spec.Path, de.w.Config.NVocab, s.cfg.NVocab)
	}
	if t := de.w.Config.NCtxTrain; s.nCtx > t {
		return nil, fmt.Errorf("native: %w", &engine.ContextError{NCtx: s.nCtx, NCtxTrain: t, Model: "the draft " + spec.Path})
	}
	// One mapping for both: replace the empty session's arena.
	as, err := newKVArenas([]*Config{s.cfg, &de.w.Config}, s.kv.Type, s.nCtx)
	if err != nil {
		return nil, fmt.Errorf("native: draft %s: %w", spec.Path, err)
	}
	old := s.kv
	s.kv, s.kvDraftShared = as[0], true
	old.Close()
	if err := s.applyAnchorZone(); err != nil {
		return nil, err
	}
	s.gr.key = graphKey{}
	s.stats.KVBytes = s.kv.Bytes()
	sc := engine.SessionConfig{NCtx: s.nCtx, NBatch: s.nBatch, Threads: s.tp.NThreads()}
	switch {
	case !s.flash:
		sc.Attention = engine.AttentionClassic
	case s.ownAttn:
		sc.Attention = engine.AttentionEdgellm
	}
	ds, err := de.newSessionOn(sc, as[1])
	if err != nil { // the failed session closed its arena
		return nil, fmt.Errorf("native: draft %s: %w", spec.Path, err)
	}
	// A windowed target can run past the context: the draft gets a window
	// too (any window is correct for a draft; the target's widest).
	if w := maxWindow(s); w > 0 {
		if err := ds.SetWindow(s.anchors, w); err != nil {
			ds.Close()
			return nil, fmt.Errorf("native: draft %s: %w", spec.Path, err)
		}
	}
	return &modelDrafter{s: ds}, nil
}

func maxWindow(s *Session) int {
	w := 0
	for _, rg := range s.rings {
		w = max(w, rg.window)
	}
	return w
}

func (d *modelDrafter) draft(sp *Speculator, k int) error {
	ds := d.s
	pend := sp.hist[ds.n:] // committed tokens it has not seen, and the last
	step := ds.nBatch
	for _, rg := range ds.rings {
		if rg.window > 0 {
			step = min(step, rg.end-ds.anchors-rg.window)
		}
	}
	if ds.ctxBound() && ds.n+len(pend)+k > ds.nCtx {
		return nil // the draft's context is full: plain steps
	}
	for len(pend) > 0 {
		c := pend[:min(len(pend), step)]
		if err := d.graphs.decode(ds, c, engine.LogitsLast); err != nil {
			return err
		}
		sp.stats.DraftSteps++
		pend = pend[len(c):]
	}
	for i := range k {
		if err := ds.Logits(ds.lastN-1, sp.dlogits); err != nil {
			return err
		}
		t, ok, err := sp.proposeFrom(sp.dlogits, i)
		if err != nil || !ok {
			return err
		}
		sp.drafts = append(sp.drafts, t)
		if i == k-1 {
			break // the last draft is not decoded until it is committed
		}
		sp.one[0] = t
		if err := ds.Decode(sp.one[:], engine.LogitsLast); err != nil {
			return err
		}
		sp.stats.DraftSteps++
	}
	return nil
}

// sync keeps the draft's positions that hold committed tokens.
func (d *modelDrafter) sync(sp *Speculator) error {
	if n := len(sp.hist) - 1; d.s.n > n {
		return d.s.Truncate(n)
	}
	return nil
}

func (d *modelDrafter) kvBytes() int64 { return d.s.kv.PartBytes() }
func (d *modelDrafter) close() error {
	err := d.graphs.close()
	if e := d.s.Close(); e != nil {
		err = e
	}
	return err
}
