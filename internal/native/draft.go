package native

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// DraftKind is a kind of draft for speculative decoding.
type DraftKind int

// Draft kinds.
const (
	// DraftSkip is early exit: the target's first N layers, then its final
	// norm and output head. It shares the KV of those layers exactly.
	DraftSkip DraftKind = iota + 1
	// DraftSelf is the same model at a lower precision (a weight set loaded
	// with Options.ExtraSets), every layer and the head. Its provisional
	// rows are written in place and overwritten by the verify batch.
	DraftSelf
	// DraftModel is a separate smaller model with the same vocabulary; its
	// KV lives in the target session's memfd (draftmodel.go).
	DraftModel
	// DraftNgram is prompt lookup: the tokens that followed the longest
	// earlier match of the context's last n-gram. No model.
	DraftNgram
)

// DraftSpec selects a draft.
type DraftSpec struct {
	Kind DraftKind
	N    int     // DraftSkip: layers run
	Type string  // DraftSelf: weight type of the set ("q4_0")
	Set  int     // DraftSelf: the set index, resolved by the session
	Path string  // DraftModel: the GGUF file
	Eng  *Engine // DraftModel: the loaded draft (LoadDraft); owned by the caller
}

// String is the spec in the CLI's syntax.
func (d DraftSpec) String() string {
	switch d.Kind {
	case DraftSkip:
		return fmt.Sprintf("skip:%d", d.N)
	case DraftSelf:
		return "self:" + d.Type
	case DraftModel:
		return d.Path
	case DraftNgram:
		return "ngram"
	}
	return "none"
}

// ParseDraftSpec parses skip:N, self:TYPE, ngram or a GGUF path. A path is
// not opened here (LoadDraft does that).
func ParseDraftSpec(v string) (DraftSpec, error) {
	switch {
	case v == "":
		return DraftSpec{}, errors.New("empty draft spec (want skip:N, self:TYPE, ngram or FILE.gguf)")
	case v == "ngram":
		return DraftSpec{Kind: DraftNgram}, nil
	case strings.HasPrefix(v, "skip:"):
		n, err := strconv.Atoi(v[len("skip:"):])
		if err != nil || n < 1 {
			return DraftSpec{}, fmt.Errorf("draft %q: want skip:N with N ≥ 1 layers", v)
		}
		return DraftSpec{Kind: DraftSkip, N: n}, nil
	case strings.HasPrefix(v, "self:"):
		t := strings.ToLower(v[len("self:"):])
		if t == "" {
			return DraftSpec{}, fmt.Errorf("draft %q: want self:TYPE (e.g. self:q4_0)", v)
		}
		return DraftSpec{Kind: DraftSelf, Type: t}, nil
	}
	return DraftSpec{Kind: DraftModel, Path: v}, nil
}

// drafter proposes draft tokens for a Speculator.
type drafter interface {
	// draft proposes up to k tokens after sp.hist into sp.drafts (with
	// sp.q when sampling from a model draft). The target session holds
	// sp.hist but its last token; the draft may write provisional
	// positions into it (the Speculator truncates them).
	draft(sp *Speculator, k int) error
	// sync follows the session after a round (rolls back the draft's own
	// state, if any).
	sync(sp *Speculator) error
	kvBytes() int64 // KV bytes the draft adds
	close() error
}

// newDrafter resolves spec against the session.
func (s *Session) newDrafter(spec DraftSpec) (drafter, error) {
	switch spec.Kind {
	case DraftSkip:
		if spec.N >= s.cfg.NLayer {
			return nil, fmt.Errorf("native: draft skip:%d: the model has %d layers (want N < %d)", spec.N, s.cfg.NLayer, s.cfg.NLayer)
		}
		return s.newPassDrafter(&pass{skip: spec.N})
	case DraftSelf:
		set := -1
		var have []string
		for i, w := range s.eng.sets {
			si := setInfo(w)
			have = append(have, si.Type)
			if i > 0 && si.Type == spec.Type && set < 0 {
				set = i
			}
		}
		if set < 0 {
			return nil, fmt.Errorf("native: draft self:%s: no %s weight set loaded (sets: %s; add one with Options.ExtraSets)",
				spec.Type, spec.Type, strings.Join(have, ", "))
		}
		return s.newPassDrafter(&pass{set: set, self: true})
	case DraftNgram:
		return &ngramDrafter{}, nil
	case DraftModel:
		return s.newModelDrafter(spec)
	}
	return nil, fmt.Errorf("native: draft kind %d", spec.Kind)
}

// pass is a draft's way of running the session's graph over its KV: the
// first skip layers of the selected sets (skip:N), or every layer and the
// head of weight set `set` (self:TYPE). It has its own graph and
// activation buffer, so the target's graph is reused across rounds.
type pass struct {
	skip    int
	set     int
	self    bool
	setLays []*LayerWeights // self: set's layers
	gr      *graph
	ga      *kernels.Gallocr
}

func (p *pass) layers(s *Session) []*LayerWeights {
	if p.self {
		return p.setLays
	}
	return s.layers[:p.skip]
}

func (p *pass) head(s *Session) *Weights {
	if p.self {
		return s.eng.sets[p.set]
	}
	return s.eng.sets[s.headSet]
}

// passDrafter drafts with a pass over the session's own KV.
type passDrafter struct {
	p   *pass
	eng *Engine
}

// countUse counts a self draft's set as used (by = +1) or not (-1), so
// Engine.AdviseUnused leaves its pages alone while it drafts.
func (d *passDrafter) countUse(by int) {
	if !d.p.self {
		return
	}
	u := &d.eng.use[d.p.set]
	for il := range u.layer {
		u.layer[il] += by
	}
	u.head += by
}

func (s *Session) newPassDrafter(p *pass) (*passDrafter, error) {
	if p.self {
		w := s.eng.sets[p.set]
		for i := range w.Layers {
			p.setLays = append(p.setLays, &w.Layers[i])
		}
	}
	var err error
	if p.gr, err = s.newGraph(); err != nil {
		return nil, err
	}
	if p.ga, err = kernels.NewGallocr(); err != nil {
		p.gr.Close()
		return nil, err
	}
	d := &passDrafter{p: p, eng: s.eng}
	d.countUse(1)
	return d, nil
}

func (d *passDrafter) draft(sp *Speculator, k int) error {
	s := sp.s
	sp.draftOn()
	defer sp.draftOff()
	tok := sp.hist[len(sp.hist)-1]
	for i := range k {
		sp.one[0] = tok
		if err := s.decode(d.p, sp.one[:], engine.LogitsLast); err != nil {
			return err
		}
		sp.stats.DraftSteps++
		if err := s.Logits(0, sp.dlogits); err != nil {
			return err
		}
		t, ok, err := sp.proposeFrom(sp.dlogits, i)
		if err != nil || !ok {
			return err
		}
		sp.drafts = append(sp.drafts, t)
		tok = t
	}
	return nil
}

func (d *passDrafter) sync(*Speculator) error { return nil }
func (d *passDrafter) kvBytes() int64         { return 0 }
func (d *passDrafter) close() error {
	d.countUse(-1)
	d.p.ga.Close()
	return d.p.gr.Close()
}

// ngramDrafter is prompt lookup: the longest n-gram (ngramMax down to
// ngramMin tokens) ending the context that occurred before; the tokens that
// followed its latest earlier occurrence are the drafts (point masses).
type ngramDrafter struct{}

const ngramMax, ngramMin = 4, 2

func (ngramDrafter) draft(sp *Speculator, k int) error {
	h := sp.hist
	for n := min(ngramMax, len(h)-1); n >= ngramMin; n-- {
		suf := h[len(h)-n:]
		for st := len(h) - n - 1; st >= 0; st-- {
			if !equal32(h[st:st+n], suf) {
				continue
			}
			from := st + n
			to := min(from+k, len(h))
			sp.drafts = append(sp.drafts, h[from:to]...)
			return nil
		}
	}
	return nil
}

func equal32(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (ngramDrafter) sync(*Speculator) error { return nil }
func (ngramDrafter) kvBytes() int64         { return 0 }
func (ngramDrafter) close() error           { return nil }
