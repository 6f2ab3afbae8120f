package native

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/memfd"
	"github.com/edgellm/edgellm/kernels"
)

// KVArena is a session's KV cache: one memfd mapped MAP_SHARED, carved into a
// K and a V region per layer. Each region is a ggml tensor of nSlots rows of
// n_head_kv*head_dim elements ([n_embd_kv, n_slots], V not transposed), and
// starts on a page boundary so a layer's unused slots can be released with
// MADV_DONTNEED independently of the others.
type KVArena struct {
	Type   kernels.GGMLType
	NSlots int
	RowK   int64 // bytes per slot per layer, K (V is the same)
	K, V   []kernels.Tensor
	// WholeRow is true when head_dim is not a multiple of the type's block
	// size: rows are quantized whole and dequantized before attention.
	WholeRow bool

	kOff, vOff []int64 // region offsets in the memfd
	part       int64   // bytes of this arena's own regions
	shared     bool    // a second part of another arena's memfd (draftmodel.go): Close leaves the memfd
	zone       int64   // private anonymous bytes at the start of each region (anchors.go)
	merge      bool    // the zones are advised MADV_MERGEABLE (anchors.go)
	mem        *memfd.Buffer
	buf        *kernels.BackendBuffer
	meta       *kernels.GGMLContext
}

// kvGGMLType maps the engine's KV type to its ggml type (kernels.KVGGMLType).
func kvGGMLType(t engine.KVType) (kernels.GGMLType, error) {
	g, _, err := kernels.KVGGMLType(t)
	return g, err
}

// NewKVArena allocates the arena for cfg with nSlots slots per layer.
func NewKVArena(cfg *Config, typ kernels.GGMLType, nSlots int) (*KVArena, error) {
	as, err := newKVArenas([]*Config{cfg}, typ, nSlots)
	if err != nil {
		return nil, err
	}
	return as[0], nil
}

// newKVArenas allocates one memfd for several models' KV (a target and its
// draft model: one mapping, one accounting) and returns an arena per
// model over it. The first owns the memfd: close the others first.
func newKVArenas(cfgs []*Config, typ kernels.GGMLType, nSlots int) ([]*KVArena, error) {
	if nSlots <= 0 {
		return nil, fmt.Errorf("KV arena: %d slots", nSlots)
	}
	ps := int64(os.Getpagesize())
	var off int64
	var as []*KVArena
	for i, cfg := range cfgs {
		width := int64(cfg.NEmbdKV())
		if !typ.RowOK(width) {
			return nil, fmt.Errorf("KV arena: a %s row needs a multiple of %d elements, the model's K/V rows have %d (n_head_kv %d × head_dim %d)",
				typ, typ.BlockSize(), width, cfg.NHeadKV, cfg.HeadDim)
		}
		a := &KVArena{Type: typ, NSlots: nSlots, RowK: typ.RowSize(width),
			WholeRow: int64(cfg.HeadDim)%typ.BlockSize() != 0, shared: i > 0}
		region := (a.RowK*int64(nSlots) + ps - 1) / ps * ps
		for il := 0; il < cfg.NLayer; il++ {
			a.kOff = append(a.kOff, off)
			off += region
			a.vOff = append(a.vOff, off)
			off += region
		}
		a.part = 2 * region * int64(cfg.NLayer)
		as = append(as, a)
	}
	mem, err := memfd.New("edgellm-kv", int(off))
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			for i := len(as) - 1; i >= 0; i-- {
				as[i].Close()
			}
		}
	}()
	for i, a := range as {
		a.mem = mem
		if err := a.place(cfgs[i]); err != nil {
			return nil, err
		}
	}
	ok = true
	return as, nil
}

// place creates the arena's K and V tensors in its regions of the memfd.
func (a *KVArena) place(cfg *Config) error {
	var err error
	width := int64(cfg.NEmbdKV())
	typ, nSlots := a.Type, a.NSlots
	b := a.mem.Bytes()
	if a.buf, err = kernels.NewBufferFromPtr(unsafe.Pointer(&b[0]), int64(len(b))); err != nil {
		return err
	}
	if a.meta, err = kernels.NewGGMLContext(2*cfg.NLayer, 0); err != nil {
		return err
	}
	for il := 0; il < cfg.NLayer; il++ {
		for _, kv := range []struct {
			dst *[]kernels.Tensor
			off int64
			nm  string
		}{{&a.K, a.kOff[il], "k"}, {&a.V, a.vOff[il], "v"}} {
			t, err := a.meta.NewTensor(typ, width, int64(nSlots))
			if err != nil {
				return err
			}
			t.SetName(fmt.Sprintf("cache_%s_l%d", kv.nm, il))
			if err := a.buf.Place(t, kv.off); err != nil {
				return err
			}
			*kv.dst = append(*kv.dst, t)
		}
	}
	return nil
}

// BytesPerToken is the KV memory one token costs across all layers.
func (a *KVArena) BytesPerToken() int64 { return 2 * a.RowK * int64(len(a.K)) }

// Bytes is the arena's mapped size: the whole memfd, a draft model's part
// included when it shares it.
func (a *KVArena) Bytes() int64 { return int64(a.mem.Len()) }

// PartBytes is the size of this arena's own regions of the memfd (a
// draft model's part of a shared arena, or all of it).
func (a *KVArena) PartBytes() int64 { return a.part }

// Discard releases slots [s0, s1) of layer il (K and V) back to the kernel
// (MADV_DONTNEED on the whole pages inside the range): RSS and PSS drop,
// and the slots read as zero afterwards.
func (a *KVArena) Discard(il, s0, s1 int) error {
	if il < 0 || il >= len(a.K) || s0 < 0 || s1 > a.NSlots || s0 >= s1 {
		return fmt.Errorf("KV discard: layer %d slots [%d, %d)", il, s0, s1)
	}
	ps := int64(os.Getpagesize())
	for _, base := range []int64{a.kOff[il], a.vOff[il]} {
		lo := base + int64(s0)*a.RowK
		hi := base + int64(s1)*a.RowK
		lo = (lo + ps - 1) / ps * ps
		hi = hi / ps * ps
		if hi > lo {
			if err := a.mem.Discard(int(lo), int(hi-lo)); err != nil {
				return err
			}
		}
	}
	return nil
}

// region returns the bytes of layer il's K (v false) or V region.
func (a *KVArena) region(il int, v bool) []byte {
	off := a.kOff[il]
	if v {
		off = a.vOff[il]
	}
	n := a.RowK * int64(a.NSlots)
	return a.mem.Bytes()[off : off+n]
}

// Close releases the arena. Safe to call twice.
func (a *KVArena) Close() error {
	if a == nil {
		return nil
	}
	a.buf.Close()
	a.buf = nil
	a.meta.Close()
	a.meta = nil
	if a.shared {
		a.mem = nil
		return nil
	}
	if a.mem != nil {
		err := a.mem.Close()
		a.mem = nil
		return err
	}
	return nil
}
