package native

import (
	"errors"
	"fmt"

	"github.com/edgellm/edgellm/host/engine"
)

// Dropping and re-attaching the draft (ABI 1.6's Decision.draft: a policy
// under memory pressure frees what the draft holds, and takes it back when
// memory recovers). A detached Speculator takes plain steps with the same
// sampler and random stream (keyed by position, internal/sample), so the
// text does not depend on when the draft came and went; greedy text is the
// plain text either way.
//
// Detach closes the drafter: a pass drafter's graph and activations (skip,
// self), a draft model's session, whose KV pages in the target's memfd are
// released first (MADV_REMOVE): the mapping keeps its size, the memory goes
// back to the kernel. With the draft model's KV gone the target's KV type
// may change again (SetKVType refuses while a draft shares the arena).
// Attach builds the drafter again; a draft model gets a KV arena of its own
// (the target's memfd is not grown), of the target's KV type at that time,
// and catches up on the committed tokens at its first round (the
// drafter's usual catch-up, modelDrafter.draft).

// detachedDrafter proposes nothing: every round is a plain step.
type detachedDrafter struct{}

func (detachedDrafter) draft(*Speculator, int) error { return nil }
func (detachedDrafter) sync(*Speculator) error       { return nil }
func (detachedDrafter) kvBytes() int64               { return 0 }
func (detachedDrafter) close() error                 { return nil }

// Detached reports whether the draft is detached (Detach).
func (sp *Speculator) Detached() bool {
	_, ok := sp.d.(detachedDrafter)
	return ok
}

// Detach drops the draft and releases its memory (see above); the rounds
// that follow are plain steps until Attach. A draft model's engine (its
// weights) is the caller's to close. Detaching twice is a no-op.
func (sp *Speculator) Detach() error {
	if sp.d == nil {
		return ErrClosed
	}
	if sp.Detached() {
		return nil
	}
	var err error
	if md, ok := sp.d.(*modelDrafter); ok {
		if sp.draftPool != nil {
			md.s.be.SetThreadpool(md.s.tp, 0)
		}
		a := md.s.kv
		for il := range a.K {
			err = errors.Join(err, a.Discard(il, 0, a.NSlots))
		}
		sp.s.kvDraftShared = false
	}
	err = errors.Join(err, sp.d.close())
	sp.d = detachedDrafter{}
	return err
}

// Attach builds the draft again after Detach. eng is the draft model's
// engine for a draft-model spec (loaded again by the caller, LoadDraft),
// ignored otherwise. Attaching an attached draft is a no-op.
func (sp *Speculator) Attach(eng *Engine) error {
	if sp.d == nil {
		return ErrClosed
	}
	if !sp.Detached() {
		return nil
	}
	var d drafter
	var err error
	if sp.spec.Kind == DraftModel {
		if eng == nil {
			return fmt.Errorf("native: draft %s: not loaded (LoadDraft)", sp.spec.Path)
		}
		sp.spec.Eng = eng
		d, err = sp.s.newModelDrafterAlone(eng)
	} else {
		d, err = sp.s.newDrafter(sp.spec)
	}
	if err != nil {
		return err
	}
	if md, ok := d.(*modelDrafter); ok && sp.draftPool != nil {
		md.s.be.SetThreadpool(sp.draftPool.tp, 0)
	}
	sp.d = d
	return nil
}

// DraftWeightBytes is the draft model's mapped weights (0 for skip, self
// and n-gram drafts, which use the target's, and while detached).
func (sp *Speculator) DraftWeightBytes() int64 {
	if md, ok := sp.d.(*modelDrafter); ok {
		return int64(len(md.s.eng.w.mapping))
	}
	return 0
}

// newModelDrafterAlone is newModelDrafter on a session that has decoded
// already: the draft's KV is an arena of its own.
func (s *Session) newModelDrafterAlone(de *Engine) (*modelDrafter, error) {
	if de.w.Config.NVocab != s.cfg.NVocab {
		return nil, fmt.Errorf("native: draft %s has a vocabulary of %d tokens, the target has %d", de.w.Path, de.w.Config.NVocab, s.cfg.NVocab)
	}
	as, err := newKVArenas([]*Config{&de.w.Config}, s.kv.Type, s.nCtx)
	if err != nil {
		return nil, fmt.Errorf("native: draft %s: %w", de.w.Path, err)
	}
	sc := engine.SessionConfig{NCtx: s.nCtx, NBatch: s.nBatch, Threads: s.tp.NThreads()}
	switch {
	case !s.flash:
		sc.Attention = engine.AttentionClassic
	case s.ownAttn:
		sc.Attention = engine.AttentionEdgellm
	}
	ds, err := de.newSessionOn(sc, as[0])
	if err != nil {
		return nil, fmt.Errorf("native: draft %s: %w", de.w.Path, err)
	}
	if w := maxWindow(s); w > 0 {
		if err := ds.SetWindow(s.anchors, w); err != nil {
			ds.Close()
			return nil, fmt.Errorf("native: draft %s: %w", de.w.Path, err)
		}
	}
	return &modelDrafter{s: ds}, nil
}
