package native

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/kernels"
)

// Advice is the kernel access advice for a weight mapping (madvise).
type Advice string

// Access advice values.
const (
	AdviceNormal     Advice = "normal"     // MADV_NORMAL: default readahead
	AdviceRandom     Advice = "random"     // MADV_RANDOM: no readahead
	AdviceSequential Advice = "sequential" // MADV_SEQUENTIAL: aggressive readahead
)

func (a Advice) flag() (int, error) {
	switch a {
	case "", AdviceNormal:
		return unix.MADV_NORMAL, nil
	case AdviceRandom:
		return unix.MADV_RANDOM, nil
	case AdviceSequential:
		return unix.MADV_SEQUENTIAL, nil
	}
	return 0, fmt.Errorf("unknown access advice %q (want normal, random or sequential)", a)
}

// LayerWeights are one transformer block's tensors: pointers into the
// mapping, shapes (ne[0] first) in comments.
type LayerWeights struct {
	AttnNorm kernels.Tensor // (n_embd)
	Wq       kernels.Tensor // (n_embd, n_head*head_dim)
	Wk       kernels.Tensor // (n_embd, n_head_kv*head_dim)
	Wv       kernels.Tensor // (n_embd, n_head_kv*head_dim)
	Wo       kernels.Tensor // (n_head*head_dim, n_embd)
	FFNNorm  kernels.Tensor // (n_embd)
	WGate    kernels.Tensor // (n_embd, n_ff); zero with a fused gate-up
	WUp      kernels.Tensor // (n_embd, n_ff); (n_embd, 2*n_ff) fused, gate first (Phi-3)
	WDown    kernels.Tensor // (n_ff, n_embd)

	// Family tensors (family.go); zero when the family has none.
	Wqkv         kernels.Tensor // (n_embd, (n_head+2*n_head_kv)*head_dim), fused q|k|v (Phi-3); Wq/Wk/Wv zero then
	Bq, Bk, Bv   kernels.Tensor // q, k, v biases (Qwen2)
	QNorm, KNorm kernels.Tensor // (head_dim) per-head RMSNorm weights (Qwen3, Gemma 3)
	PostAttnNorm kernels.Tensor // (n_embd) (Gemma 2/3)
	PostFFNNorm  kernels.Tensor // (n_embd) (Gemma 2/3)

	lo, hi int64 // file byte range covering the layer's tensors
}

// Matrices are the layer's weight matrices present in its family (the
// seven of llama; Phi-3's fused attn_qkv and ffn_up instead of four).
func (l *LayerWeights) Matrices() []kernels.Tensor {
	var out []kernels.Tensor
	for _, t := range []kernels.Tensor{l.Wq, l.Wk, l.Wv, l.Wqkv, l.Wo, l.WGate, l.WUp, l.WDown} {
		if !t.Nil() {
			out = append(out, t)
		}
	}
	return out
}

// Weights is one mmap'd GGUF file: the read-only weights of a llama model.
// Tensors point into the mapping (no copy). Close unmaps; every graph using
// the tensors must be gone by then.
type Weights struct {
	Path   string
	File   *gguf.File
	Config Config

	TokEmbd   kernels.Tensor // (n_embd, n_vocab)
	OutNorm   kernels.Tensor // (n_embd)
	Output    kernels.Tensor // (n_embd, n_vocab); = TokEmbd when tied
	RopeFreqs kernels.Tensor // (head_dim/2), llama-3 frequency factors; zero if absent
	// RopeLong and RopeShort are Phi-3's LongRoPE factors (head_dim/2):
	// long for sessions longer than Config.NCtxOrig; zero if absent.
	RopeLong, RopeShort kernels.Tensor
	Layers              []LayerWeights
	Tied                bool

	// DataPageAligned is false when the data section does not start on a
	// page boundary (it still works: the whole file is mapped).
	DataPageAligned bool

	// Repack is what WeightsOptions.Repack did (zero without it).
	Repack RepackStats

	mapping []byte
	buf     *kernels.BackendBuffer
	repack  *kernels.BackendBuffer // CPU_REPACK copies of matrices; nil without Repack
	meta    *kernels.GGMLContext

	// With Repack, the layers and head as the mapping holds them and as the
	// repack buffer does; Layers and Output are one or the other, per unit
	// (SetRepackLayers, repack.go).
	plainLayers, packedLayers []LayerWeights
	plainOut, packedOut       kernels.Tensor
	units                     []repackUnit // layers 0..n-1, then the head if it has a copy
	target                    int          // units asked to be repacked (SetRepackLayers)
	// ownMem holds the units' q4x4 copies (ownlayout.go); own is the
	// engine's lookup of those in use. Nil without them.
	ownMem []byte
	own    *ownLayouts
}

// WeightsOptions controls how a file is mapped.
type WeightsOptions struct {
	// WillNeedLayers is how many leading layers get MADV_WILLNEED at load
	// (plus the output head); WillNeedAll = all, 0 or WillNeedNone = none.
	WillNeedLayers int
	// Advice is the access advice for the whole mapping.
	Advice Advice
	// Repack copies the matrices ggml has interleaved kernels for into its
	// CPU_REPACK buffer (repack.go): faster matrix products, paid for in
	// anonymous memory (Weights.Repack). Nothing eligible is not an error.
	Repack bool
	// RepackLayers is Options.RepackLayers: the units filled at load (0 =
	// all, RepackNone = none); the others are placed in the buffer but not
	// written, and use the mapped twins until SetRepackLayers.
	RepackLayers int
	// own (non-nil: Options.Kernels "edgellm" on a CPU that runs q4x4)
	// makes edgellm's q4x4 layout the repacked layout of the plain Q4_0
	// matrices, per unit (ownlayout.go), with or without Repack; units
	// register their copies in it.
	own *ownLayouts
}

// OpenWeights parses the GGUF header at path, validates every tensor the
// llama graph needs, maps the file (MAP_PRIVATE, PROT_READ) and points ggml
// tensors into the mapping.
func OpenWeights(path string, o WeightsOptions) (*Weights, error) {
	h, err := parseWeights(path)
	if err != nil {
		return nil, err
	}
	return h.open(o)
}

// weightsHeader is a parsed and validated GGUF header, not yet mapped.
type weightsHeader struct {
	path  string
	f     *gguf.File
	cfg   Config
	specs []tensorSpec
	infos []*gguf.TensorInfo // per spec; nil for an absent optional tensor
}

// parseWeights reads and validates the header at path without mapping it.
func parseWeights(path string) (*weightsHeader, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	cfg, err := readConfig(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	specs := cfg.specs()
	if name := extraTensor(f, specs); name != "" {
		return nil, fmt.Errorf("%s: %w: %s is not a tensor of the native %s graph (refused: it would be ignored)", path, ErrTensor, name, cfg.Arch)
	}
	infos := make([]*gguf.TensorInfo, len(specs))
	for i := range specs {
		t, ok := f.Tensor(specs[i].name)
		if !ok {
			if specs[i].optional {
				continue
			}
			return nil, fmt.Errorf("%s: %w: %s missing", path, ErrTensor, specs[i].name)
		}
		if err := checkTensor(f, &specs[i], t); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		infos[i] = t
	}
	return &weightsHeader{path: path, f: f, cfg: cfg, specs: specs, infos: infos}, nil
}

// open maps a validated header's file and points tensors into it.
func (h *weightsHeader) open(o WeightsOptions) (*Weights, error) {
	path, f, cfg, specs, infos := h.path, h.f, h.cfg, h.specs, h.infos
	adv, err := o.Advice.flag()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	// Map the whole file: GGUF aligns tensor data to 32 bytes, not to pages,
	// so mapping only the data section would need an aligned start anyway.
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() != f.FileSize {
		return nil, fmt.Errorf("%s: file changed size while loading (%d, header saw %d)", path, st.Size(), f.FileSize)
	}
	mapping, err := unix.Mmap(int(fd.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	w := &Weights{Path: path, File: f, Config: cfg, mapping: mapping,
		DataPageAligned: f.DataOffset%int64(os.Getpagesize()) == 0}
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	if err := unix.Madvise(mapping, adv); err != nil {
		return nil, fmt.Errorf("%s: madvise: %w", path, err)
	}
	if w.buf, err = kernels.NewBufferFromPtr(unsafe.Pointer(&mapping[0]), int64(len(mapping))); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	w.buf.SetWeightsUsage()
	if w.meta, err = kernels.NewGGMLContext(2*len(specs)+3, 0); err != nil { // with Repack: a plain and a repacked tensor per matrix
		return nil, err
	}
	var rp *repackPlan
	if o.Repack {
		rp = planRepack(specs, infos, o.own != nil)
		w.Repack = rp.stats
		if rp.stats.BufferBytes > 0 {
			if w.repack, err = kernels.NewRepackBuffer(rp.stats.BufferBytes); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			w.repack.SetWeightsUsage()
			w.Repack.HugePageBytes = w.repack.HugePageBytes()
		}
	}
	tensors := make(map[string]kernels.Tensor, len(specs))
	plain := make(map[string]kernels.Tensor) // the mapped twin of each repacked tensor
	rt := make(map[string]repackedTensor)
	for i, sp := range specs {
		t := infos[i]
		if t == nil {
			continue
		}
		x, err := w.meta.NewTensor(kernels.GGMLType(t.Type), t.Dims...)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, sp.name, err)
		}
		x.SetName(sp.name)
		if off, ok := rp.offset(i); ok {
			if err = w.repackOrPlace(x, off, f.AbsOffset(t), repackUnitOf(sp.name, cfg.NLayer), o.RepackLayers); err == nil {
				rt[sp.name] = repackedTensor{x: x, off: off, fileOff: f.AbsOffset(t)}
				plain[sp.name], err = w.placeTwin(t, sp.name)
			}
		} else {
			err = w.buf.Place(x, f.AbsOffset(t))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		tensors[sp.name] = x
	}
	if rp != nil && rp.outDup >= 0 {
		// The tied head, repacked as its own copy: the embedding stays mapped
		// for get_rows (llama.cpp's TENSOR_DUPLICATED output).
		t := infos[rp.embdIdx]
		x, err := w.meta.NewTensor(kernels.GGMLType(t.Type), t.Dims...)
		if err != nil {
			return nil, fmt.Errorf("%s: output copy: %w", path, err)
		}
		x.SetName("output.weight")
		if err := w.repackOrPlace(x, rp.outDup, f.AbsOffset(t), cfg.NLayer, o.RepackLayers); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		tensors["output.weight"] = x
		rt["output.weight"] = repackedTensor{x: x, off: rp.outDup, fileOff: f.AbsOffset(t)}
		plain["output.weight"] = tensors["token_embd.weight"]
	}
	w.TokEmbd = tensors["token_embd.weight"]
	w.OutNorm = tensors["output_norm.weight"]
	w.RopeFreqs = tensors["rope_freqs.weight"]
	w.RopeLong, w.RopeShort = tensors["rope_factors_long.weight"], tensors["rope_factors_short.weight"]
	w.Tied = outputSpec(specs) < 0 || infos[outputSpec(specs)] == nil
	if out, ok := tensors["output.weight"]; ok {
		w.Output = out
	} else {
		w.Output = w.TokEmbd
	}
	w.Layers = make([]LayerWeights, cfg.NLayer)
	for i := range w.Layers {
		b := fmt.Sprintf("blk.%d.", i)
		l := &w.Layers[i]
		l.AttnNorm, l.Wq, l.Wk, l.Wv = tensors[b+"attn_norm.weight"], tensors[b+"attn_q.weight"], tensors[b+"attn_k.weight"], tensors[b+"attn_v.weight"]
		l.Wo, l.FFNNorm = tensors[b+"attn_output.weight"], tensors[b+"ffn_norm.weight"]
		l.WGate, l.WUp, l.WDown = tensors[b+"ffn_gate.weight"], tensors[b+"ffn_up.weight"], tensors[b+"ffn_down.weight"]
		l.Wqkv = tensors[b+"attn_qkv.weight"]
		l.Bq, l.Bk, l.Bv = tensors[b+"attn_q.bias"], tensors[b+"attn_k.bias"], tensors[b+"attn_v.bias"]
		l.QNorm, l.KNorm = tensors[b+"attn_q_norm.weight"], tensors[b+"attn_k_norm.weight"]
		l.PostAttnNorm, l.PostFFNNorm = tensors[b+"post_attention_norm.weight"], tensors[b+"post_ffw_norm.weight"]
		l.lo, l.hi = f.FileSize, 0
		for si, sp := range specs {
			t := infos[si]
			if t == nil || !strings.HasPrefix(sp.name, b) {
				continue
			}
			l.lo = min(l.lo, f.AbsOffset(t))
			l.hi = max(l.hi, f.AbsOffset(t)+t.Size)
		}
	}
	if w.repack != nil || o.own != nil {
		if err := w.initUnits(plain, rt, o.RepackLayers, o.own); err != nil {
			return nil, err
		}
	}
	// Warm what the first token needs first: the leading layers and the
	// output head. The rest faults in on use (or by readahead).
	n := o.WillNeedLayers
	switch {
	case n == WillNeedNone:
		n = 0
	case n < 0 || n > cfg.NLayer:
		n = cfg.NLayer
	}
	for i := 0; i < n; i++ {
		w.advise(w.Layers[i].lo, w.Layers[i].hi, unix.MADV_WILLNEED)
	}
	if n > 0 {
		out, _ := f.Tensor("output.weight")
		if out != nil {
			w.advise(f.AbsOffset(out), f.AbsOffset(out)+out.Size, unix.MADV_WILLNEED)
		}
	}
	ok = true
	return w, nil
}

// advise applies madvise to the file range [lo, hi), widened to pages.
func (w *Weights) advise(lo, hi int64, advice int) error {
	ps := int64(os.Getpagesize())
	lo = lo / ps * ps
	hi = min((hi+ps-1)/ps*ps, int64(len(w.mapping)))
	if hi <= lo {
		return nil
	}
	return unix.Madvise(w.mapping[lo:hi], advice)
}

// AdviseLayer applies madvise to one layer's weights (MADV_WILLNEED before
// use, MADV_COLD / MADV_PAGEOUT / MADV_DONTNEED when a set stops being used).
func (w *Weights) AdviseLayer(il int, advice int) error {
	if il < 0 || il >= len(w.Layers) {
		return fmt.Errorf("layer %d out of range", il)
	}
	return w.advise(w.Layers[il].lo, w.Layers[il].hi, advice)
}

// Size is the mapped file size.
func (w *Weights) Size() int64 { return int64(len(w.mapping)) }

// Close unmaps the file. Safe to call twice.
func (w *Weights) Close() error {
	if w == nil {
		return nil
	}
	w.closeOwn()
	w.buf.Close()
	w.buf = nil
	w.repack.Close()
	w.repack = nil
	w.meta.Close()
	w.meta = nil
	if w.mapping != nil {
		err := unix.Munmap(w.mapping)
		w.mapping = nil
		return err
	}
	return nil
}
