package native

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/edgellm/edgellm/host/engine"
)

// Weight sets: the same model at several precisions (Options.ExtraSets), all
// mapped; each session chooses per layer which set its graph uses, and the
// embedding/output head set. Switching is a pointer change plus one graph
// rebuild at the next step: the KV cache is untouched (it holds activations,
// which do not depend on where the weights came from). See RATIONALE.md.

// SetInfo describes one weight set (set 0 is the file passed to Load).
type SetInfo = engine.WeightSet

// ColdAdvice is what the advise step does to the pages of a (set, layer)
// that no session uses.
type ColdAdvice string

// Cold advice values.
const (
	// ColdDontNeed (the default) unmaps the pages from this process
	// (MADV_DONTNEED): RSS drops at once; the file pages stay in the page
	// cache (clean, reclaimable) and fault back in cheaply on reuse.
	ColdDontNeed ColdAdvice = "dontneed"
	// ColdCold deactivates the pages (MADV_COLD): they stay mapped and
	// counted in RSS until memory pressure reclaims them first.
	ColdCold ColdAdvice = "cold"
	// ColdPageout reclaims them now (MADV_PAGEOUT).
	ColdPageout ColdAdvice = "pageout"
	// ColdOff never advises.
	ColdOff ColdAdvice = "off"
)

func (a ColdAdvice) flag() (int, error) {
	switch a {
	case "", ColdDontNeed:
		return unix.MADV_DONTNEED, nil
	case ColdCold:
		return unix.MADV_COLD, nil
	case ColdPageout:
		return unix.MADV_PAGEOUT, nil
	case ColdOff:
		return -1, nil
	}
	return 0, fmt.Errorf("unknown cold advice %q (want dontneed, cold, pageout or off)", a)
}

// sameModel checks that h is the same model as base at another precision:
// same architecture and hyper-parameters (hence tensor shapes, which
// parseWeights validated against them) and the same vocabulary.
func sameModel(base, h *weightsHeader) error {
	a, b := &base.cfg, &h.cfg
	type field struct {
		name string
		x, y any
	}
	for _, f := range []field{
		{"architecture", a.Arch, b.Arch}, {"layers", a.NLayer, b.NLayer}, {"n_embd", a.NEmbd, b.NEmbd},
		{"n_ff", a.NFF, b.NFF}, {"heads", a.NHead, b.NHead}, {"kv heads", a.NHeadKV, b.NHeadKV},
		{"n_vocab", a.NVocab, b.NVocab}, {"context_length", a.NCtxTrain, b.NCtxTrain},
		{"rms epsilon", a.NormEps, b.NormEps}, {"rope base", a.RopeBase, b.RopeBase},
		{"rope scale", a.RopeScale, b.RopeScale}, {"rope_freqs", a.RopeFreqs, b.RopeFreqs},
		{"head dim", a.HeadDim, b.HeadDim}, {"sliding window", a.NSWA, b.NSWA},
		{"attention soft-cap", a.AttnSoftcap, b.AttnSoftcap}, {"final soft-cap", a.FinalSoftcap, b.FinalSoftcap},
		{"LongRoPE", a.LongRoPE, b.LongRoPE}, {"rope attn factor", a.RopeAttnFactor, b.RopeAttnFactor},
	} {
		if f.x != f.y {
			return fmt.Errorf("%s: not the same model as %s: %s %v, want %v", h.path, base.path, f.name, f.y, f.x)
		}
	}
	const key = "tokenizer.ggml.tokens"
	na, ea := base.f.GetArrayLen(key)
	nb, eb := h.f.GetArrayLen(key)
	if (ea == nil) != (eb == nil) || na != nb {
		return fmt.Errorf("%s: not the same model as %s: %s has %d entries, want %d", h.path, base.path, key, nb, na)
	}
	ma, _ := base.f.GetString("tokenizer.ggml.model")
	mb, _ := h.f.GetString("tokenizer.ggml.model")
	if ma != mb {
		return fmt.Errorf("%s: not the same model as %s: tokenizer %q, want %q", h.path, base.path, mb, ma)
	}
	return nil
}

// setInfo summarises a mapped set.
func setInfo(w *Weights) SetInfo {
	si := SetInfo{Name: filepath.Base(w.Path), Path: w.Path}
	var bytes, elems int64
	for i := range w.Layers {
		l := &w.Layers[i]
		si.LayerBytes += l.hi - l.lo
		for _, t := range l.Matrices() {
			typ := t.Type().String()
			switch si.Type {
			case "":
				si.Type = typ
			case typ, "mixed":
			default:
				si.Type = "mixed"
			}
			bytes += t.Nbytes()
			elems += t.Nelements()
		}
	}
	if elems > 0 {
		si.BitsPerWeight = float64(bytes) * 8 / float64(elems)
		si.Bits = int(si.BitsPerWeight)
	}
	return si
}

// Sets describes the loaded weight sets; set 0 is the file passed to Load.
func (e *Engine) Sets() []SetInfo {
	out := make([]SetInfo, len(e.sets))
	for i, w := range e.sets {
		out[i] = setInfo(w)
	}
	return out
}

// NSets is the number of weight sets.
func (e *Engine) NSets() int { return len(e.sets) }

// SetWeights returns set i's mapped weights.
func (e *Engine) SetWeights(i int) *Weights { return e.sets[i] }

// setUse counts, per set, the sessions using each layer and the head.
type setUse struct {
	layer []int // sessions using this set for layer i
	head  int   // sessions using this set's embedding and output head
	// cold marks what the last advise step released.
	layerCold []bool
	headCold  bool
}

func newSetUse(nLayer int) setUse {
	return setUse{layer: make([]int, nLayer), layerCold: make([]bool, nLayer)}
}

// AdviseReport says what one advise step did.
type AdviseReport struct {
	ColdLayers int   // (set, layer) ranges advised cold
	ColdBytes  int64 // bytes in them
	WarmLayers int   // previously cold ranges in use again (MADV_WILLNEED)
	// Repack is what the step did to repacked copies (LoadOptions.Repack):
	// a cold unit's copy is released, a unit in use again is repacked
	// again when the count asked for covers it.
	Repack RepackChange
}

// AdviseUnused is the advise step: the layers (and heads) of every set that
// no open session uses get Options.ColdAdvice; ranges advised cold before and
// in use again get MADV_WILLNEED. Only pages wholly inside a cold range are
// advised, so a neighbouring range in use is never touched. Cheap when
// nothing changed (no system call). Call it after switching sets, off the
// token's critical path if possible: releasing pages costs about as much as
// faulting them in.
func (e *Engine) AdviseUnused() (AdviseReport, error) {
	var r AdviseReport
	if e.closed {
		return r, ErrClosed
	}
	cold, err := e.opts.ColdAdvice.flag()
	if err != nil || cold < 0 {
		return r, err
	}
	for si, w := range e.sets {
		u := &e.use[si]
		for il := range w.Layers {
			lo, hi := w.Layers[il].lo, w.Layers[il].hi
			switch {
			case u.layer[il] == 0 && !u.layerCold[il]:
				if err := w.adviseInner(lo, hi, cold); err != nil {
					return r, fmt.Errorf("native: %s: layer %d: madvise: %w", w.Path, il, err)
				}
				u.layerCold[il] = true
				r.ColdLayers++
				r.ColdBytes += hi - lo
				if err := e.coldUnit(w, il, true, &r.Repack); err != nil {
					return r, err
				}
			case u.layer[il] > 0 && u.layerCold[il]:
				w.advise(lo, hi, unix.MADV_WILLNEED)
				u.layerCold[il] = false
				r.WarmLayers++
				if err := e.coldUnit(w, il, false, &r.Repack); err != nil {
					return r, err
				}
			}
		}
		switch {
		case u.head == 0 && !u.headCold:
			for _, rg := range w.headRanges() {
				if err := w.adviseInner(rg[0], rg[1], cold); err != nil {
					return r, fmt.Errorf("native: %s: head: madvise: %w", w.Path, err)
				}
				r.ColdBytes += rg[1] - rg[0]
			}
			u.headCold = true
			if err := e.coldUnit(w, len(w.Layers), true, &r.Repack); err != nil {
				return r, err
			}
		case u.head > 0 && u.headCold:
			for _, rg := range w.headRanges() {
				w.advise(rg[0], rg[1], unix.MADV_WILLNEED)
			}
			u.headCold = false
			if err := e.coldUnit(w, len(w.Layers), false, &r.Repack); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// coldUnit marks a repacked unit of set w cold or warm (Weights.setUnitCold;
// unit nLayer is the head, which only some sets have) and bumps the repack
// generation when that changed a tensor.
func (e *Engine) coldUnit(w *Weights, unit int, cold bool, c *RepackChange) error {
	if unit >= len(w.units) {
		return nil
	}
	before := c.Released + c.Restored
	if err := w.setUnitCold(unit, cold, c); err != nil {
		return fmt.Errorf("native: %w", err)
	}
	if c.Released+c.Restored != before {
		e.repackGen++
	}
	return nil
}

// headRanges are the file ranges of the embedding, output norm and head.
func (w *Weights) headRanges() [][2]int64 {
	var out [][2]int64
	for _, n := range []string{"token_embd.weight", "output_norm.weight", "output.weight", "rope_freqs.weight"} {
		if t, ok := w.File.Tensor(n); ok {
			lo := w.File.AbsOffset(t)
			out = append(out, [2]int64{lo, lo + t.Size})
		}
	}
	return out
}

// adviseInner applies madvise to the whole pages inside [lo, hi).
func (w *Weights) adviseInner(lo, hi int64, advice int) error {
	ps := int64(os.Getpagesize())
	lo = (lo + ps - 1) / ps * ps
	hi = min(hi/ps*ps, int64(len(w.mapping)))
	if hi <= lo {
		return nil
	}
	return unix.Madvise(w.mapping[lo:hi], advice)
}

// SetLayerSet makes layer use weight set `set` from the next Decode on.
// The KV cache is kept: no re-prefill, Len is unchanged.
func (s *Session) SetLayerSet(layer, set int) error {
	if s.kv == nil {
		return ErrClosed
	}
	if layer < 0 || layer >= len(s.layerSet) {
		return fmt.Errorf("native: layer %d out of range [0, %d)", layer, len(s.layerSet))
	}
	if set < 0 || set >= len(s.eng.sets) {
		return fmt.Errorf("native: weight set %d out of range [0, %d)", set, len(s.eng.sets))
	}
	s.moveLayer(layer, set)
	return nil
}

// SetLayerSets sets every layer's weight set at once (len(sets) = layers);
// nothing changes when one entry is out of range.
func (s *Session) SetLayerSets(sets []int) error {
	if s.kv == nil {
		return ErrClosed
	}
	if len(sets) != len(s.layerSet) {
		return fmt.Errorf("native: %d layer sets for %d layers", len(sets), len(s.layerSet))
	}
	for il, set := range sets {
		if set < 0 || set >= len(s.eng.sets) {
			return fmt.Errorf("native: layer %d: weight set %d out of range [0, %d)", il, set, len(s.eng.sets))
		}
	}
	for il, set := range sets {
		s.moveLayer(il, set)
	}
	return nil
}

func (s *Session) moveLayer(il, set int) {
	old := s.layerSet[il]
	if old == set {
		return
	}
	s.eng.use[old].layer[il]--
	s.eng.use[set].layer[il]++
	s.layerSet[il] = set
	s.layers[il] = &s.eng.sets[set].Layers[il]
	s.selGen++
}

// SetHeadSet makes the token embedding, output norm and output head come
// from weight set `set` from the next Decode on.
func (s *Session) SetHeadSet(set int) error {
	if s.kv == nil {
		return ErrClosed
	}
	if set < 0 || set >= len(s.eng.sets) {
		return fmt.Errorf("native: weight set %d out of range [0, %d)", set, len(s.eng.sets))
	}
	if set != s.headSet {
		s.eng.use[s.headSet].head--
		s.eng.use[set].head++
		s.headSet = set
		s.selGen++
	}
	return nil
}

// LayerSets is each layer's current weight set.
func (s *Session) LayerSets() []int { return append([]int(nil), s.layerSet...) }

// HeadSet is the weight set of the embedding and output head.
func (s *Session) HeadSet() int { return s.headSet }

// SetBits is the nominal precision of each weight set (SetInfo.Bits), for
// callers that map precision decisions to sets.
func (s *Session) SetBits() []int {
	out := make([]int, len(s.eng.sets))
	for i, w := range s.eng.sets {
		out[i] = setInfo(w).Bits
	}
	return out
}

// AdviseUnused runs the engine's advise step (Engine.AdviseUnused).
func (s *Session) AdviseUnused() error {
	_, err := s.eng.AdviseUnused()
	return err
}

// initSets puts a new session on set 0 (on a tier ladder, the engine's
// current tier) and counts it.
func (s *Session) initSets() {
	e := s.eng
	set := e.tier.cur // 0 unless the sets are a tier ladder
	s.layerSet = make([]int, s.cfg.NLayer)
	s.layers = make([]*LayerWeights, s.cfg.NLayer)
	for i := range s.layers {
		s.layerSet[i] = set
		s.layers[i] = &e.sets[set].Layers[i]
		e.use[set].layer[i]++
	}
	s.headSet = set
	e.use[set].head++
	s.counted = true
}

// releaseSets uncounts a closing session.
func (s *Session) releaseSets() {
	if !s.counted {
		return
	}
	s.counted = false
	e := s.eng
	for il, set := range s.layerSet {
		e.use[set].layer[il]--
	}
	e.use[s.headSet].head--
}
