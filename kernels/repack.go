package kernels

/*
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

// edgellm_repack_buft is the CPU device's CPU_REPACK extra buffer type, found
// the way llama.cpp finds it (make_cpu_buft_list): through the registry's
// ggml_backend_dev_get_extra_bufts. NULL when the build does not register it
// (GGML_USE_CPU_REPACK undefined).
static ggml_backend_buffer_type_t edgellm_repack_buft(void) {
	ggml_backend_reg_t reg = ggml_backend_cpu_reg();
	if (reg == NULL || ggml_backend_reg_dev_count(reg) == 0) {
		return NULL;
	}
	ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
	ggml_backend_dev_get_extra_bufts_t fn = (ggml_backend_dev_get_extra_bufts_t)
		ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
	if (fn == NULL) {
		return NULL;
	}
	for (ggml_backend_buffer_type_t * b = fn(dev); b != NULL && *b != NULL; b++) {
		if (strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) {
			return *b;
		}
	}
	return NULL;
}

// edgellm_repack_supported asks the CPU device whether a MUL_MAT with a weight
// of this type and shape in the CPU_REPACK buffer type is supported, exactly
// as llama.cpp's weight_buft_supported does (a 512-column F32 activation, the
// weight placed in a zero-size buffer of the type). 1 yes, 0 no, -1 error.
static int edgellm_repack_supported(ggml_backend_buffer_type_t buft, enum ggml_type type, int64_t ne0, int64_t ne1) {
	struct ggml_init_params ip = { ggml_tensor_overhead()*8, NULL, true };
	struct ggml_context * ctx = ggml_init(ip);
	if (ctx == NULL) {
		return -1;
	}
	struct ggml_tensor * w = ggml_new_tensor_2d(ctx, type, ne0, ne1);
	struct ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, 512);
	struct ggml_tensor * op = ggml_mul_mat(ctx, w, b);
	ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, 0);
	if (buf == NULL) {
		ggml_free(ctx);
		return -1;
	}
	w->buffer = buf;
	ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
	int ok = dev != NULL && ggml_backend_dev_supports_op(dev, op);
	w->buffer = NULL;
	ggml_backend_buffer_free(buf);
	ggml_free(ctx);
	return ok;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoRepack: repacking was asked for in a build without ggml's CPU_REPACK
// buffer type (made without GGML_USE_CPU_REPACK, e.g. make REPACK=0).
var ErrNoRepack = errors.New("this build has no repacked weight layouts (built without GGML_USE_CPU_REPACK)")

var repackBuft struct {
	once sync.Once
	p    C.ggml_backend_buffer_type_t
}

func repackType() C.ggml_backend_buffer_type_t {
	repackBuft.once.Do(func() { repackBuft.p = C.edgellm_repack_buft() })
	return repackBuft.p
}

// RepackAvailable reports whether this build registers ggml's CPU_REPACK
// buffer type (built with GGML_USE_CPU_REPACK, the Makefile's default).
func RepackAvailable() bool { return repackType() != nil }

// RepackEligible reports whether ggml repacks a matrix of this type and shape
// (ne0 × ne1, the weight of a MUL_MAT) into an interleaved layout on this CPU:
// the same question llama.cpp asks when it chooses a weight's buffer type, so
// both engines repack the same tensors. In this ggml: Q4_0, IQ4_NL, Q4_K
// (AVX2 or ARM dot product) and Q2_K (AVX-512) with ne1 a multiple of 8 (4 on
// some ARM kernels); not Q8_0 or F32. False when RepackAvailable is false.
func RepackEligible(typ GGMLType, ne0, ne1 int64) bool {
	b := repackType()
	if b == nil || !typ.RowOK(ne0) || ne1 <= 0 {
		return false
	}
	return C.edgellm_repack_supported(b, C.enum_ggml_type(typ), C.int64_t(ne0), C.int64_t(ne1)) == 1
}

// RepackTypes lists the ggml types RepackEligible accepts on this CPU (for a
// 256 × 8 matrix: the shape every repacked kernel takes), by asking ggml for
// each type this build knows. Empty when RepackAvailable is false.
func RepackTypes() []string {
	var names []string
	for t := GGMLType(0); t < ggmlTypeCount; t++ {
		if t.Valid() && RepackEligible(t, 256, 8) {
			names = append(names, t.String())
		}
	}
	return names
}

// NewRepackBuffer allocates a CPU_REPACK buffer of size bytes: anonymous
// memory owned by ggml (not backed by a file, so the kernel cannot drop it
// under pressure, only swap it). Tensors are put in it with SetRepacked.
func NewRepackBuffer(size int64) (*BackendBuffer, error) {
	b := repackType()
	if b == nil {
		return nil, ErrNoRepack
	}
	if size <= 0 {
		return nil, ggmlErr("repack buffer: size %d", size)
	}
	p := C.ggml_backend_buft_alloc_buffer(b, C.size_t(size))
	if p == nil {
		return nil, ggmlErr("repack buffer: cannot allocate %d bytes", size)
	}
	bb := &BackendBuffer{p: p, base: C.ggml_backend_buffer_get_base(p), size: size}
	if RepackHugePages() {
		bb.huge = adviseHuge(bb.base, size)
	}
	return bb, nil
}

// HugePageBytes is the part of the buffer advised for transparent huge pages
// (MADV_HUGEPAGE on its 2 MiB-aligned interior; 0 when not advised).
func (b *BackendBuffer) HugePageBytes() int64 { return b.huge }

// hugePage is the transparent huge page size on x86-64 and on arm64 with 4 KiB
// pages, the kernels this project builds for.
const hugePage = 2 << 20

// RepackHugePages reports whether repack buffers are advised for transparent
// huge pages: yes unless SetRepackHugePages(false) (the CLI maps
// EDGELLM_REPACK_HUGEPAGES=0 to it). Decode streams every
// repacked weight once per token; with 4 KiB pages that is one TLB miss per
// page (143,000 per token on a 558 MiB model). Quiet, one thread, SYNTHETIC
// llama3.2-1b Q4_0 repacked: 29.7–31.0 tok/s advised against 25.4–28.0
// without, in alternating processes (docs/BENCHMARKS.md, "Huge pages"). With the kernel's
// THP set to "never" the advice does nothing; set to "madvise" (Debian's and
// most Android kernels' default) only advised memory gets huge pages. The
// switch exists for kernels where compaction at load costs more than it gives.
func RepackHugePages() bool { return !noRepackHugePages.Load() }

// SetRepackHugePages turns the huge-page advice of repack buffers allocated
// from now on on or off, process-wide (default on).
func SetRepackHugePages(on bool) { noRepackHugePages.Store(!on) }

var noRepackHugePages atomic.Bool

// hugeMinBuffer is the smallest buffer adviseHuge advises: glibc serves an
// allocation this large (its largest dynamic mmap threshold, 32 MiB on
// 64-bit) from a mapping of its own, while a smaller one can come from a
// malloc arena, whose pages the advice would then cover for whatever reuses
// them after the buffer is freed (seen in the test suite: a second buffer
// at the same address carried the first one's "hg" flag). Small buffers
// gain little from huge pages anyway.
const hugeMinBuffer = 32 << 20

// adviseHuge applies MADV_HUGEPAGE to the 2 MiB-aligned pages inside
// [base, base+size) of a buffer of at least hugeMinBuffer bytes, before
// anything is written there, so that the first touch faults in huge pages,
// and returns how many bytes it advised. Advice the kernel refuses (no THP
// support) is not an error: the buffer works with small pages.
func adviseHuge(base unsafe.Pointer, size int64) int64 {
	if size < hugeMinBuffer {
		return 0
	}
	lo := (uintptr(base) + hugePage - 1) &^ (hugePage - 1)
	hi := (uintptr(base) + uintptr(size)) &^ (hugePage - 1)
	if hi <= lo {
		return 0
	}
	start := unsafe.Add(base, lo-uintptr(base))
	if unix.Madvise(unsafe.Slice((*byte)(start), hi-lo), unix.MADV_HUGEPAGE) != nil {
		return 0
	}
	return int64(hi - lo)
}

// RepackAlignment is the alignment of a tensor's offset in a repack buffer.
func RepackAlignment() int64 {
	b := repackType()
	if b == nil {
		return 32
	}
	return int64(C.ggml_backend_buft_get_alignment(b))
}

// SetRepacked allocates tensor t (unallocated, eligible per RepackEligible)
// at offset bytes into a repack buffer and writes its data from src (the
// tensor's plain ggml layout, Nbytes long), which ggml converts into the
// interleaved layout. src is only read during the call.
func (b *BackendBuffer) SetRepacked(t Tensor, offset int64, src unsafe.Pointer) error {
	if src == nil {
		return ggmlErr("set repacked: nil source")
	}
	if err := b.PlaceRepacked(t, offset); err != nil {
		return err
	}
	C.ggml_backend_tensor_set(t.p, src, 0, C.size_t(t.Nbytes()))
	return nil
}

// PlaceRepacked allocates tensor t (unallocated, eligible per
// RepackEligible) at offset bytes into a repack buffer without writing it:
// its pages stay untouched (not resident) until Refill writes the data.
func (b *BackendBuffer) PlaceRepacked(t Tensor, offset int64) error {
	if b.p == nil || t.p == nil {
		return ggmlErr("place repacked: nil buffer or tensor")
	}
	if C.ggml_backend_buffer_get_type(b.p) != repackType() {
		return ggmlErr("set repacked %q: not a repack buffer", t.Name())
	}
	if !RepackEligible(t.Type(), t.Ne(0), t.Ne(1)) || t.Ne(2) != 1 || t.Ne(3) != 1 {
		return ggmlErr("set repacked %q: %s %dx%d is not repackable here", t.Name(), t.Type(), t.Ne(0), t.Ne(1))
	}
	return b.Place(t, offset)
}

// Repacked reports whether t lives in a CPU_REPACK buffer.
func (t Tensor) Repacked() bool {
	return t.p != nil && t.p.buffer != nil && repackType() != nil && C.ggml_backend_buffer_get_type(t.p.buffer) == repackType()
}

// Refill writes tensor t's data again from src (its plain ggml layout,
// Nbytes long), which ggml repacks into the place SetRepacked gave t in this
// buffer: for a tensor whose pages Release dropped. src is only read during
// the call.
func (b *BackendBuffer) Refill(t Tensor, src unsafe.Pointer) error {
	if b.p == nil || t.p == nil || src == nil {
		return ggmlErr("refill: nil buffer, tensor or source")
	}
	if t.p.buffer != b.p {
		return ggmlErr("refill %q: the tensor is not in this buffer", t.Name())
	}
	C.ggml_backend_tensor_set(t.p, src, 0, C.size_t(t.Nbytes()))
	return nil
}

// Release gives the pages wholly inside [offset, offset+size) of the buffer
// back to the system (MADV_DONTNEED): the memory stops counting in RSS at
// once and reads as zero until written again, so every tensor there must
// be Refilled before a graph reads it. It returns the bytes released
// (whole pages; the partial pages at either end stay).
func (b *BackendBuffer) Release(offset, size int64) (int64, error) {
	if b.p == nil {
		return 0, ggmlErr("release: closed buffer")
	}
	if offset < 0 || size < 0 || offset+size > b.size {
		return 0, ggmlErr("release: [%d, %d) outside buffer of %d bytes", offset, offset+size, b.size)
	}
	ps := uintptr(os.Getpagesize())
	base := uintptr(b.base)
	lo := (base + uintptr(offset) + ps - 1) &^ (ps - 1)
	hi := (base + uintptr(offset+size)) &^ (ps - 1)
	if hi <= lo {
		return 0, nil
	}
	start := unsafe.Add(b.base, lo-base)
	if err := unix.Madvise(unsafe.Slice((*byte)(start), hi-lo), unix.MADV_DONTNEED); err != nil {
		return 0, fmt.Errorf("release: madvise: %w", err)
	}
	return int64(hi - lo), nil
}

// Bytes is the buffer's memory, for checks that read it (tests). The slice
// aliases the buffer: valid until Close; reading faults its pages in.
func (b *BackendBuffer) Bytes() []byte {
	if b.p == nil || b.size == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(b.base), b.size)
}

// Resident is how many bytes of the buffer's pages are resident in memory
// now (mincore over the pages it spans, the partial ones at its ends
// included).
func (b *BackendBuffer) Resident() (int64, error) {
	if b.p == nil {
		return 0, ggmlErr("resident: closed buffer")
	}
	ps := uintptr(os.Getpagesize())
	base := uintptr(b.base)
	lo := base &^ (ps - 1)
	hi := (base + uintptr(b.size) + ps - 1) &^ (ps - 1)
	vec := make([]byte, (hi-lo)/ps)
	start := unsafe.Add(b.base, -int(base-lo))
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(start), hi-lo, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, fmt.Errorf("resident: mincore: %w", e)
	}
	var n int64
	for _, v := range vec {
		n += int64(v & 1)
	}
	return n * int64(ps), nil
}
