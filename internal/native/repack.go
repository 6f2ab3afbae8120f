package native

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/kernels"
)

// RepackStats is what repacking cost one weight set (WeightsOptions.Repack).
// Repacked matrices are copied out of the file mapping into ggml's CPU_REPACK
// buffer (interleaved blocks for its faster Q4_0/IQ4_NL/Q4_K kernels): that
// copy is anonymous memory, not page cache, so the kernel cannot drop it
// under pressure (only swap it), and madvise on the set's layers
// (AdviseLayer, cold sets, layer windows) no longer releases those weights.
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
// test llama.cpp applies when use_extra_bufts is on.
func planRepack(specs []tensorSpec, infos []*gguf.TensorInfo) *repackPlan {
	p := &repackPlan{off: map[int]int64{}, outDup: -1, embdIdx: -1}
	align := kernels.RepackAlignment()
	var size int64
	add := func(t *gguf.TensorInfo) (int64, bool) {
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
// (ggml converts the layout) and drops the source pages lying wholly inside
// the tensor from this process's mapping: they stay in the page cache,
// clean and reclaimable, but no longer count twice in the RSS.
func (w *Weights) repackTensor(x kernels.Tensor, off, fileOff int64) error {
	if err := w.repack.SetRepacked(x, off, unsafe.Pointer(&w.mapping[fileOff])); err != nil {
		return err
	}
	ps := int64(os.Getpagesize())
	lo := (fileOff + ps - 1) / ps * ps
	hi := (fileOff + x.Nbytes()) / ps * ps
	if hi > lo {
		unix.Madvise(w.mapping[lo:hi], unix.MADV_DONTNEED)
	}
	return nil
}
