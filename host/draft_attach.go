package host

import (
	"errors"
	"fmt"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/native"
)

// Dropping and re-attaching a Draft (ABI 1.6, Decision.draft): under
// memory pressure a policy frees what the draft holds (its KV; a draft
// model's weights too) and takes it back when memory recovers. While
// detached every round is a plain step with the same sampler, so greedy
// text is the plain text and a seeded sampled text does not depend on
// when the draft came and went (the random stream is keyed by position).
// A draft model's KV shares the session's memfd until it is detached; the
// session's KV type cannot change while it does (drop the draft first:
// the adapter applies a decision's draft before its kv_type), and a
// re-attached draft model gets a KV arena of its own, so the session's KV
// type may change under it afterwards.

// ErrDraftDetached is returned (wrapped) by operations that need the
// draft while it is detached.
var ErrDraftDetached = errors.New("the draft is detached")

// Detached reports whether the draft is detached (Detach).
func (d *Draft) Detached() bool { return d.sp != nil && d.sp.Detached() }

// Detach drops the draft and frees its memory: its KV (pages released to
// the kernel) and, for a draft model, its weights (unmapped). Rounds go on
// as plain steps until Attach. Detaching twice is a no-op.
func (d *Draft) Detach() error {
	if d.sp == nil {
		return errors.New("the Draft is closed")
	}
	if d.sp.Detached() {
		return nil
	}
	err := d.sp.Detach()
	if d.de != nil {
		err = errors.Join(err, d.de.Close())
		d.de = nil
	}
	return err
}

// Attach builds the draft again after Detach (a draft model is mapped
// again from its file); it catches up on the tokens so far at its first
// round. Attaching an attached draft is a no-op.
func (d *Draft) Attach() error {
	if d.sp == nil {
		return errors.New("the Draft is closed")
	}
	if !d.sp.Detached() {
		return nil
	}
	spec, err := native.ParseDraftSpec(d.spec)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDraftSpec, err)
	}
	var de *native.Engine
	if spec.Kind == native.DraftModel {
		target, ok := d.sess.Engine().(*native.Engine)
		if !ok {
			return ErrDraftEngine
		}
		if de, err = native.LoadDraft(spec.Path, target); err != nil {
			return err
		}
	}
	if err := d.sp.Attach(de); err != nil {
		if de != nil {
			de.Close()
		}
		return err
	}
	d.de = de
	return nil
}

// MemoryBytes is the memory the draft holds now: its KV plus a draft
// model's mapped weights (0 while detached, and for skip, self and n-gram
// drafts, which share the session's KV and weights).
func (d *Draft) MemoryBytes() int64 {
	if d.sp == nil {
		return 0
	}
	return d.sp.DraftKVBytes() + d.sp.DraftWeightBytes()
}

// draftSwitch is a Draft as the Adapter drives it.
type draftSwitch interface {
	Detach() error
	Attach() error
	Detached() bool
	MemoryBytes() int64
}

var _ draftSwitch = (*Draft)(nil)

// fillDraft writes the 1.6 draft sensors (bit 33 only when a draft is
// configured).
func (a *Adapter) fillDraft(s *abi.Sensors) {
	if a.draft == nil {
		return
	}
	s.DraftState = abi.DraftAttached
	if a.draft.Detached() {
		s.DraftState = abi.DraftDetached
	}
	s.DraftMB = float32(a.draft.MemoryBytes()) / (1 << 20)
	s.Present |= abi.PresentDraft
}

// setDraft carries out d.Draft (a request, not a state: it is left at
// DraftLeave).
func (a *Adapter) setDraft(_ int, d *abi.Decision, _ abi.Decision) (string, error) {
	want := d.Draft
	d.Draft = abi.DraftLeave
	if a.draft == nil {
		return "", nil
	}
	switch {
	case want == abi.DraftDetach && !a.draft.Detached():
		mb := float64(a.draft.MemoryBytes()) / (1 << 20)
		if err := a.draft.Detach(); err != nil {
			return "", err
		}
		return fmt.Sprintf("draft detached (%.2f MiB freed)", mb), nil
	case want == abi.DraftAttach && a.draft.Detached():
		if err := a.draft.Attach(); err != nil {
			return "", err
		}
		return fmt.Sprintf("draft attached (%.2f MiB)", float64(a.draft.MemoryBytes())/(1<<20)), nil
	}
	return "", nil
}
