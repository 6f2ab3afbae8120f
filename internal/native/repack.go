package native

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/kernels"
)

// RepackStats is what repacking cost one weight set (WeightsOptions.Repack).
// Repacked matrices are copied out of the file mapping into ggml's CPU_REPACK
// buffer (interleaved blocks for its faster Q4_0/IQ4_NL/Q4_K kernels): that
// copy is anonymous memory, not page cache, so the kernel cannot drop it
// under pressure (only swap it), and madvise on the mapping (AdviseLayer)
// does not release it. What does: SetRepackLayers, and the advise step for
// the units of a set no session uses (Engine.AdviseUnused). The stats
// describe the buffer (every eligible matrix), not what is resident now
// (RepackState).
type RepackStats struct {
	// Tensors is how many matrices were repacked; Bytes their size, which is
	// the anonymous memory they occupy (BufferBytes adds the alignment
	// padding between them: the allocation).
	Tensors     int   `json:"tensors"`
	Bytes       int64 `json:"bytes"`
	BufferBytes int64 `json:"buffer_bytes"`
	// Skipped is how many matrix weights ggml does not repack on this CPU
	// (their type or shape has no interleaved kernel, e.g. Q8_0 or F32):
	// they stay in the mapping.
	Skipped int `json:"skipped"`
	// OutputCopy is true when the output head is tied to the token
	// embedding and was repacked as a separate copy (the embedding, read by
	// get_rows, stays mapped), as llama.cpp does.
	OutputCopy bool `json:"output_copy"`
	// HugePageBytes is the part of the buffer advised for transparent huge
	// pages (kernels.RepackHugePages; 0 when switched off or the kernel
	// refused the advice).
	HugePageBytes int64 `json:"huge_page_bytes"`
}

// repackPlan is which tensors of a weight set go into the repack buffer and
// at what offsets.
type repackPlan struct {
	off     map[int]int64 // spec index -> offset in the buffer
	outDup  int64         // offset of the tied output's copy; -1 = none
	embdIdx int           // spec index of token_embd (the tied output's source)
	stats   RepackStats
}

// planRepack chooses the matrices to repack: every mul_mat weight (the seven
// per layer and the output head, also when it is tied to the token
// embedding) whose type and shape ggml's CPU_REPACK buffer accepts, the same
// test llama.cpp applies when use_extra_bufts is on. With ownQ4 the plain
// Q4_0 matrices are left out: edgellm's q4x4 layout repacks them
// (ownlayout.go).
func planRepack(specs []tensorSpec, infos []*gguf.TensorInfo, ownQ4 bool) *repackPlan {
	p := &repackPlan{off: map[int]int64{}, outDup: -1, embdIdx: -1}
	align := kernels.RepackAlignment()
	var size int64
	add := func(t *gguf.TensorInfo) (int64, bool) {
		if ownQ4 && kernels.GGMLType(t.Type) == kernels.GGMLTypeQ4_0 {
			return 0, false
		}
		if !kernels.RepackEligible(kernels.GGMLType(t.Type), t.Dims[0], t.Dims[1]) {
			p.stats.Skipped++
			return 0, false
		}
		off := (size + align - 1) / align * align
		size = off + t.Size
		p.stats.Tensors++
		p.stats.Bytes += t.Size
		return off, true
	}
	hasOutput := false
	for i, sp := range specs {
		t := infos[i]
		switch {
		case t == nil:
			continue
		case sp.name == "token_embd.weight":
			p.embdIdx = i
		case sp.name == "output.weight":
			hasOutput = true
		}
		if sp.role != roleMatMul || len(t.Dims) != 2 {
			continue
		}
		if off, ok := add(t); ok {
			p.off[i] = off
		}
	}
	if !hasOutput && p.embdIdx >= 0 {
		if off, ok := add(infos[p.embdIdx]); ok {
			p.outDup = off
			p.stats.OutputCopy = true
		}
	}
	p.stats.BufferBytes = size
	return p
}

// offset is where spec i goes in the repack buffer; false when it is not
// repacked (or there is no plan).
func (p *repackPlan) offset(i int) (int64, bool) {
	if p == nil {
		return 0, false
	}
	off, ok := p.off[i]
	return off, ok
}

// outputSpec is the index of output.weight in specs.
func outputSpec(specs []tensorSpec) int {
	for i := range specs {
		if specs[i].name == "output.weight" {
			return i
		}
	}
	return -1
}

// repackTensor copies one tensor out of the mapping into the repack buffer
// (ggml converts the layout) and drops the source pages from this process's
// mapping (dropSource).
func (w *Weights) repackTensor(x kernels.Tensor, off, fileOff int64) error {
	if err := w.repack.SetRepacked(x, off, unsafe.Pointer(&w.mapping[fileOff])); err != nil {
		return err
	}
	w.dropSource(fileOff, x.Nbytes())
	return nil
}

// repackUnitOf is the unit a matrix belongs to: its layer, or nLayer for
// the output head.
func repackUnitOf(name string, nLayer int) int {
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				return n
			}
		}
	}
	return nLayer
}

// repackedAtLoad reports whether unit u is filled at load for
// Options.RepackLayers k (0 = all, negative = none).
func repackedAtLoad(u, k int) bool { return u < repackTarget(k, math.MaxInt) }

// repackOrPlace repacks x at load when its unit is filled then
// (repackedAtLoad), else only places it in the buffer, unwritten.
func (w *Weights) repackOrPlace(x kernels.Tensor, off, fileOff int64, unit, k int) error {
	if repackedAtLoad(unit, k) {
		return w.repackTensor(x, off, fileOff)
	}
	return w.repack.PlaceRepacked(x, off)
}

// dropSource drops the mapping's pages lying wholly inside a repacked
// tensor's file range from this process: they stay in the page cache,
// clean and reclaimable, but no longer count twice in the RSS.
func (w *Weights) dropSource(fileOff, n int64) {
	ps := int64(os.Getpagesize())
	lo := (fileOff + ps - 1) / ps * ps
	hi := (fileOff + n) / ps * ps
	if hi > lo {
		unix.Madvise(w.mapping[lo:hi], unix.MADV_DONTNEED)
	}
}

// placeTwin makes the mapped twin of a repacked tensor: the same data where
// the file has it, in ggml's plain layout, for the layers whose repacked
// copy is released.
func (w *Weights) placeTwin(t *gguf.TensorInfo, name string) (kernels.Tensor, error) {
	x, err := w.meta.NewTensor(kernels.GGMLType(t.Type), t.Dims...)
	if err != nil {
		return x, fmt.Errorf("%s (mapped twin): %w", name, err)
	}
	x.SetName(name)
	return x, w.buf.Place(x, w.File.AbsOffset(t))
}

// Repacked weights as a live choice. A repacked model keeps, for every
// matrix in the repack buffer, a twin pointing into the mapping. A unit (one
// layer, or the output head) either uses its repacked copy, or uses the
// twins with the copy's pages given back to the system (kernels'
// BackendBuffer.Release). Units are kept repacked from layer 0 up, the
// head last, so "k units" says which: lowering k releases the head first,
// then the highest layers. Releasing is one madvise; taking a unit back
// repacks it again from the mapping (BackendBuffer.Refill), at about the
// speed of the load's repacking. Graphs that used the old tensors must be
// rebuilt (Engine.repackGen is in the graph key).

// repackedTensor is one matrix in the repack buffer and where its source is.
type repackedTensor struct {
	x            kernels.Tensor
	off, fileOff int64 // in the repack buffer; in the file
}

// repackUnit is one layer's repacked matrices, or the head's: in ggml's
// buffer (tensors) and in edgellm's q4x4 layout (own, ownlayout.go).
type repackUnit struct {
	tensors []repackedTensor
	lo, hi  int64 // the buffer range they span
	bytes   int64 // their tensor bytes (q4x4 copies included)
	// own are the unit's q4x4 copies; [ownLo, ownHi) their range in the
	// set's ownMem, starting on a page of its own.
	own          []ownTensor
	ownLo, ownHi int64
	active       bool // the repacked copy is resident and in use
	// cold: no session uses this set's layer (or head); the advise step
	// (Engine.AdviseUnused) released the copy and the unit waits, on its
	// mapped twins, until a session uses it again.
	cold bool
}

func (u *repackUnit) add(t repackedTensor) {
	n := t.x.Nbytes()
	if len(u.tensors) == 0 {
		u.lo, u.hi = t.off, t.off+n
	}
	u.lo, u.hi = min(u.lo, t.off), max(u.hi, t.off+n)
	u.bytes += n
	u.tensors = append(u.tensors, t)
}

// initUnits records both versions of each layer and of the head (w.Layers
// and w.Output as loaded: repacked where eligible; plain: the mapped twins;
// rt: the repacked matrices), plans the q4x4 copies with own (nil: none;
// planOwn), fills those of the units filled at load and selects the twins
// for the others (the first repackTarget(k) are, k = Options.RepackLayers).
// A set with nothing in either layout has no units.
func (w *Weights) initUnits(plain map[string]kernels.Tensor, rt map[string]repackedTensor, k int, own *ownLayouts) error {
	w.packedLayers = append([]LayerWeights(nil), w.Layers...)
	w.plainLayers = append([]LayerWeights(nil), w.Layers...)
	w.units = w.units[:0]
	for i := range w.Layers {
		pl := &w.plainLayers[i]
		var u repackUnit
		b := fmt.Sprintf("blk.%d.", i)
		for _, m := range []struct {
			name string
			dst  *kernels.Tensor
		}{{"attn_q", &pl.Wq}, {"attn_k", &pl.Wk}, {"attn_v", &pl.Wv}, {"attn_qkv", &pl.Wqkv}, {"attn_output", &pl.Wo},
			{"ffn_gate", &pl.WGate}, {"ffn_up", &pl.WUp}, {"ffn_down", &pl.WDown}} {
			n := b + m.name + ".weight"
			if t, ok := rt[n]; ok {
				*m.dst = plain[n]
				u.add(t)
			}
		}
		w.units = append(w.units, u)
	}
	if t, ok := rt["output.weight"]; ok {
		w.packedOut, w.plainOut = w.Output, plain["output.weight"]
		var u repackUnit
		u.add(t)
		w.units = append(w.units, u)
	}
	if own != nil {
		if err := w.planOwn(own); err != nil {
			return err
		}
	}
	if w.repack == nil && w.ownMem == nil {
		w.units = nil
		return nil
	}
	w.target = repackTarget(k, len(w.units))
	var fill []int
	for i := range w.units {
		w.units[i].active = i < w.target // what repackOrPlace filled
		if w.units[i].active {
			fill = append(fill, i)
		}
		w.selectUnit(i)
	}
	return w.fillOwn(fill...)
}

// repackTarget is the count of units Options.RepackLayers k asks for.
func repackTarget(k, units int) int {
	switch {
	case k == 0:
		return units
	case k < 0:
		return 0
	}
	return min(k, units)
}

// startCold makes a set loaded with nothing repacked (RepackNone) wait
// cold: every unit on its mapped twins, its copy repacked when a session
// uses it (setUnitCold) within the count k asks for (Options.RepackLayers).
func (w *Weights) startCold(k int) {
	w.target = repackTarget(k, len(w.units))
	for i := range w.units {
		w.units[i].cold = true
	}
}

// RepackState is how much of a model's repacked weights is in use.
type RepackState = engine.RepackState

// RepackChange is what one SetRepackLayers call did (the contract's type).
type RepackChange = engine.RepackChange

// RepackState says how much of w's repacked weights is in use: Layers is
// the count asked for (SetRepackLayers, or the load's), whether or not
// the advise step has released cold units among them; MaxBytes leaves
// cold units out (what the count at MaxLayers would hold now).
func (w *Weights) RepackState() RepackState {
	st := RepackState{Layers: w.target, MaxLayers: len(w.units)}
	for i := range w.units {
		u := &w.units[i]
		if !u.cold {
			st.MaxBytes += u.bytes
		}
		if u.active {
			st.Bytes += u.bytes
		}
	}
	return st
}

// SetRepackLayers keeps the first k units repacked (clamped to [0,
// MaxLayers]) and uses the mapped twins for the rest, releasing or
// repacking again what changes; cold units (setUnitCold) stay released
// until they are used again. Graphs built on the old tensors must be
// rebuilt before they run again. Without repacked weights it does nothing.
func (w *Weights) SetRepackLayers(k int) (RepackChange, error) {
	t0 := time.Now()
	c := RepackChange{From: w.target}
	w.target = max(0, min(k, len(w.units)))
	for i := range w.units {
		if err := w.applyUnit(i, &c); err != nil {
			return c, err
		}
	}
	c.To = w.target
	c.Time = time.Since(t0)
	return c, nil
}

// setUnitCold marks unit i cold (no session uses it) or warm, and releases
// or repacks it again accordingly (within the count asked for).
func (w *Weights) setUnitCold(i int, cold bool, c *RepackChange) error {
	if i < 0 || i >= len(w.units) || w.units[i].cold == cold {
		return nil
	}
	w.units[i].cold = cold
	return w.applyUnit(i, c)
}

// applyUnit brings unit i to what the count and its use want: repacked
// (refilled from the mapping) when i < target and it is not cold, else on
// its mapped twins with the copy's pages given back.
func (w *Weights) applyUnit(i int, c *RepackChange) error {
	u := &w.units[i]
	want := i < w.target && !u.cold
	if want == u.active {
		return nil
	}
	if want {
		for _, t := range u.tensors {
			if err := w.repack.Refill(t.x, unsafe.Pointer(&w.mapping[t.fileOff])); err != nil {
				return fmt.Errorf("%s: %w", w.Path, err)
			}
			w.dropSource(t.fileOff, t.x.Nbytes())
		}
		if err := w.fillOwn(i); err != nil {
			return err
		}
		c.Restored++
		c.RestoredBytes += u.bytes
	} else {
		if len(u.tensors) > 0 {
			if _, err := w.repack.Release(u.lo, u.hi-u.lo); err != nil {
				return fmt.Errorf("%s: %w", w.Path, err)
			}
		}
		if err := w.releaseOwn(i); err != nil {
			return err
		}
		c.Released++
		c.ReleasedBytes += u.bytes
	}
	u.active = want
	w.selectUnit(i)
	return nil
}

// selectUnit points unit i's layer (or, past the last layer, the output
// head) at its repacked tensors when the unit is active, else at the mapped
// twins.
func (w *Weights) selectUnit(i int) {
	active := w.units[i].active
	switch {
	case i == len(w.Layers) && active:
		w.Output = w.packedOut
	case i == len(w.Layers):
		w.Output = w.plainOut
	case active:
		w.Layers[i] = w.packedLayers[i]
	default:
		w.Layers[i] = w.plainLayers[i]
	}
}

// RepackState sums every weight set's repacked weights: Layers and
// MaxLayers are those of the set with the most units (every set is kept
// at the same count; a set with nothing eligible has none), the bytes are
// all sets' (MaxBytes without the units the advise step found cold).
func (e *Engine) RepackState() RepackState {
	var st RepackState
	for _, w := range e.sets {
		ws := w.RepackState()
		if ws.MaxLayers > st.MaxLayers {
			st.Layers, st.MaxLayers = ws.Layers, ws.MaxLayers
		}
		st.Bytes += ws.Bytes
		st.MaxBytes += ws.MaxBytes
	}
	return st
}

// SetRepackLayers keeps the first k units of every weight set repacked
// (layers from 0 up, the output head last; Weights.SetRepackLayers) and
// releases the rest, between steps. Every session's next step rebuilds its
// graph. The change it reports sums the sets. Weights loaded without
// repacking (or with nothing eligible) have nothing to change: an error.
func (e *Engine) SetRepackLayers(k int) (RepackChange, error) {
	if e.closed {
		return RepackChange{}, ErrClosed
	}
	st := e.RepackState()
	if st.MaxLayers == 0 {
		return RepackChange{}, errors.New("native: the weights were loaded without repacked layers")
	}
	c := RepackChange{From: st.Layers}
	t0 := time.Now()
	for _, w := range e.sets {
		wc, err := w.SetRepackLayers(k)
		addRepackChange(&c, wc)
		if wc.Released+wc.Restored > 0 {
			e.repackGen++
		}
		if err != nil {
			c.To = e.RepackState().Layers
			return c, fmt.Errorf("native: repack layers: %w", err)
		}
	}
	c.To, c.Time = e.RepackState().Layers, time.Since(t0)
	return c, nil
}

// addRepackChange counts in c what another change released and repacked
// again.
func addRepackChange(c *RepackChange, o RepackChange) {
	c.Released += o.Released
	c.Restored += o.Restored
	c.ReleasedBytes += o.ReleasedBytes
	c.RestoredBytes += o.RestoredBytes
}

// RepackState is the engine's (Engine.RepackState).
func (s *Session) RepackState() RepackState { return s.eng.RepackState() }

// SetRepackLayers changes the engine's repacked units
// (Engine.SetRepackLayers): every session of the engine sees it.
func (s *Session) SetRepackLayers(k int) (RepackChange, error) {
	if s.kv == nil {
		return RepackChange{}, ErrClosed
	}
	return s.eng.SetRepackLayers(k)
}
