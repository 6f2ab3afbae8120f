package native

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// Live KV requantization: a session's KV arena changes element type between
// steps (Session.SetKVType), in place in its memfd. Each layer's K and V
// rows in use are dequantized to float32 and quantized to the new type by
// ggml's own row functions (kernels.DequantizeRow, kernels.QuantizeRows),
// a chunk of rows at a time: towards a smaller type from the first row on
// (row r's new bytes end before old row r+1 starts), towards a larger one
// from the last row back. The pages past the smaller rows are released
// (memfd hole punch: RSS and PSS drop). Going back up to a larger type
// keeps what the smaller one lost: the values are the smaller type's,
// widened. A larger type must fit in the regions the session was created
// with (a session created at q8_0 cannot go to f16).

// RequantKVTypes are the KV types a session can requantize its arena to
// (within the size it was created with).
func (e *Engine) RequantKVTypes() []engine.KVType {
	return []engine.KVType{engine.KVF16, engine.KVQ8_0, engine.KVQ4_0}
}

// KVRequantReport says what one SetKVType did.
type KVRequantReport struct {
	From, To   kernels.GGMLType
	Changed    bool  // the arena is on To now
	Rows       int   // rows converted (K and V, all layers)
	Released   int64 // bytes of pages handed back to the kernel
	Convert    time.Duration
	ReleaseDur time.Duration
}

// kvRequantChunk is how many rows are converted per ggml call.
const kvRequantChunk = 64

// SetKVType requantizes the session's KV cache to typ in place
// (KVArena.Requantize over the rows its rings may hold); the next step
// attends over it with the new type (one graph rebuild). A refused type
// (not requantizable, too large for the arena, an arena shared with a
// draft model) changes nothing.
func (s *Session) SetKVType(typ engine.KVType) (engine.KVChange, error) {
	r, err := s.setKVType(typ)
	return engine.KVChange{From: kernels.GGMLKVType(r.From), To: kernels.GGMLKVType(r.To), Changed: r.Changed,
		Rows: r.Rows, Released: r.Released, Convert: r.Convert, Release: r.ReleaseDur}, err
}

func (s *Session) setKVType(typ engine.KVType) (KVRequantReport, error) {
	if s.kv == nil {
		return KVRequantReport{}, ErrClosed
	}
	if s.kvDraftShared {
		return KVRequantReport{}, errors.New("native: the KV arena is shared with a draft model: its type cannot change")
	}
	used := make([]int, len(s.kv.K))
	for il := range used {
		used[il] = s.rings[s.ringOf[il]].hi
	}
	from := s.kv.Type
	r, err := s.kv.Requantize(s.cfg, typ, used)
	if s.kv.Type != from {
		s.selGen++ // the graph's KV views change type: rebuild
		s.stats.KVBytesToken = s.kv.BytesPerToken()
		if zerr := s.applyAnchorZone(); zerr != nil && err == nil { // the zone follows the row size
			err = zerr
		}
	}
	return r, err
}

// Requantize converts rows [0, used[il]) of every layer's K and V to typ in
// place and releases the pages the smaller rows no longer cover. A refused
// type changes nothing; an error while releasing pages leaves the arena
// on the new type.
func (a *KVArena) Requantize(cfg *Config, typ engine.KVType, used []int) (KVRequantReport, error) {
	var r KVRequantReport
	to, err := kvGGMLType(typ)
	if err != nil {
		return r, fmt.Errorf("native: %w", err)
	}
	r.From, r.To = a.Type, to
	if to == a.Type {
		return r, nil
	}
	ok := false
	for _, k := range []engine.KVType{engine.KVF16, engine.KVQ8_0, engine.KVQ4_0} {
		ok = ok || k == typ
	}
	width := int64(cfg.NEmbdKV())
	region := a.vOff[0] - a.kOff[0] // page-rounded at creation
	switch {
	case !ok:
		return r, fmt.Errorf("native: KV type %s: live requantization goes between f16, q8_0 and q4_0", typ)
	case len(used) != len(a.K):
		return r, fmt.Errorf("native: requantize KV: %d used-row counts for %d layers", len(used), len(a.K))
	case !to.RowOK(width):
		return r, fmt.Errorf("native: KV type %s: a row needs a multiple of %d elements, the model's K/V rows have %d", typ, to.BlockSize(), width)
	case to.RowSize(width)*int64(a.NSlots) > region:
		return r, fmt.Errorf("native: KV type %s does not fit in the arena the session was created with (%s): %d bytes per layer, %d available",
			typ, a.Type, to.RowSize(width)*int64(a.NSlots), region)
	}
	for il, u := range used {
		if u < 0 || u > a.NSlots {
			return r, fmt.Errorf("native: requantize KV: layer %d: %d rows in use of %d", il, u, a.NSlots)
		}
	}
	kt, err := a.tensorsOf(cfg, to)
	if err != nil {
		return r, fmt.Errorf("native: KV type %s: %w", typ, err)
	}
	t0 := time.Now()
	oldRow, newRow := a.RowK, to.RowSize(width)
	f := make([]float32, kvRequantChunk*int(width))
	for il, u := range used {
		for _, off := range []int64{a.kOff[il], a.vOff[il]} {
			reg := a.mem.Bytes()[off : off+region]
			if err := requantRegion(reg, a.Type, to, oldRow, newRow, u, int(width), f); err != nil {
				// Every argument was checked above: a bug. The rows
				// converted so far cannot be restored.
				kt.meta.Close()
				return r, fmt.Errorf("native: layer %d: requantize KV: %w", il, err)
			}
			r.Rows += u
		}
	}
	r.Convert = time.Since(t0)
	t0 = time.Now()
	a.install(cfg, kt)
	r.Changed = true
	if newRow < oldRow {
		ps := int64(os.Getpagesize())
		for il, u := range used {
			for _, base := range []int64{a.kOff[il], a.vOff[il]} {
				lo := (base + int64(u)*newRow + ps - 1) / ps * ps
				hi := (base + min(int64(u)*oldRow, region) + ps - 1) / ps * ps
				if hi <= lo {
					continue
				}
				if err := a.mem.Discard(int(lo), int(hi-lo)); err != nil {
					return r, fmt.Errorf("native: KV requantized to %s, but releasing its pages failed: %w", typ, err)
				}
				r.Released += hi - lo
			}
		}
	}
	r.ReleaseDur = time.Since(t0)
	return r, nil
}

// requantRegion converts rows [0, used) of one K or V region from type
// from (oldRow bytes a row) to type to (newRow bytes), in place, through f
// (kvRequantChunk rows of float32).
func requantRegion(reg []byte, from, to kernels.GGMLType, oldRow, newRow int64, used, width int, f []float32) error {
	conv := func(r0, r1 int) error {
		n := (r1 - r0) * width
		if err := kernels.DequantizeRow(from, reg[int64(r0)*oldRow:int64(r1)*oldRow], f[:n]); err != nil {
			return err
		}
		_, err := kernels.QuantizeRows(uint32(to), f[:n], reg[int64(r0)*newRow:int64(r1)*newRow], r1-r0, width)
		return err
	}
	if newRow <= oldRow {
		for r0 := 0; r0 < used; r0 += kvRequantChunk {
			if err := conv(r0, min(r0+kvRequantChunk, used)); err != nil {
				return err
			}
		}
		return nil
	}
	for r1 := used; r1 > 0; r1 -= kvRequantChunk {
		if err := conv(max(0, r1-kvRequantChunk), r1); err != nil {
			return err
		}
	}
	return nil
}

// kvTensors are an arena's K and V tensors of one type, in their own
// ggml context, placed at the arena's offsets of its buffer.
type kvTensors struct {
	typ  kernels.GGMLType
	meta *kernels.GGMLContext
	k, v []kernels.Tensor
}

// tensorsOf makes the K and V tensors of type typ at the arena's offsets.
func (a *KVArena) tensorsOf(cfg *Config, typ kernels.GGMLType) (*kvTensors, error) {
	width := int64(cfg.NEmbdKV())
	meta, err := kernels.NewGGMLContext(2*cfg.NLayer, 0)
	if err != nil {
		return nil, err
	}
	kt := &kvTensors{typ: typ, meta: meta}
	for il := 0; il < cfg.NLayer; il++ {
		for _, kv := range []struct {
			dst *[]kernels.Tensor
			off int64
			nm  string
		}{{&kt.k, a.kOff[il], "k"}, {&kt.v, a.vOff[il], "v"}} {
			t, err := meta.NewTensor(typ, width, int64(a.NSlots))
			if err == nil {
				t.SetName(fmt.Sprintf("cache_%s_l%d", kv.nm, il))
				err = a.buf.Place(t, kv.off)
			}
			if err != nil {
				meta.Close()
				return nil, err
			}
			*kv.dst = append(*kv.dst, t)
		}
	}
	return kt, nil
}

// install makes kt the arena's tensors and type.
func (a *KVArena) install(cfg *Config, kt *kvTensors) {
	a.meta.Close()
	a.meta, a.K, a.V = kt.meta, kt.k, kt.v
	a.Type, a.RowK = kt.typ, kt.typ.RowSize(int64(cfg.NEmbdKV()))
	a.WholeRow = int64(cfg.HeadDim)%kt.typ.BlockSize() != 0
}
