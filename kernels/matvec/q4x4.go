package matvec

/*
#include "matvec_q4x4.h"
#include "matvec_q4x4_avx2.h"
#include "emv_split.h"
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// Q4x4 is a Q4_0 matrix in edgellm's interleaved layout (matvec_q4x4.h):
// rows in groups of 4, each group's nibbles block by block in the order
// one AVX-512 VNNI vpdpbusd takes them, then the group's fp16 scales. The
// q4x4 kernel gives bitwise the plain-block kernels' result.
type Q4x4 struct {
	buf     []byte
	off     int // buf[off:] is 64-byte aligned
	rows, k int
}

// Q4x4Available reports whether this CPU runs a q4x4 kernel (AVX-512
// F/BW/VL/DQ + VNNI, or AVX2 + FMA + F16C: Q4x4Impl); elsewhere the
// plain-block kernels are the path.
func Q4x4Available() bool { return C.emv_q4x4_usable() != 0 }

// Q4x4Impl is the q4x4 kernel emv_q4x4_matvec runs on this CPU, chosen at
// run time: AVX512VNNI where present, else AVX2 (Scalar: none).
func Q4x4Impl() Impl {
	switch {
	case C.emv_q4x4_avx2_selected() != 0:
		return AVX2
	case C.emv_q4x4_available() != 0:
		return AVX512VNNI
	}
	return Scalar
}

// ForceQ4x4AVX2 is for tests only: on, every q4x4 call in the process
// (MulQ4x4 and the ggml custom op alike) runs the AVX2 kernel with
// maddubs+madd lanes where AVX2 is present, so an AVX-512 or AVX-VNNI
// machine tests that path; off restores the run-time choice. Not for use
// while calls run.
func ForceQ4x4AVX2(on bool) { forceQ4x4(on, 1) }

// ForceQ4x4AVXVNNI is ForceQ4x4AVX2 for the AVX2 kernel's AVX-VNNI lanes
// (where the CPU has AVX-VNNI: Q4x4AVXVNNIAvailable; elsewhere the
// maddubs lanes).
func ForceQ4x4AVXVNNI(on bool) { forceQ4x4(on, 2) }

func forceQ4x4(on bool, mode C.int) {
	if !on {
		mode = 0
	}
	C.emv_q4x4_force_avx2(mode)
}

// q4x4AVX512Available reports whether the AVX-512 VNNI q4x4 kernels (and
// the tiled one, emv_q4x4_gemm) run on this CPU.
func q4x4AVX512Available() bool { return C.emv_q4x4_available() != 0 }

// Q4x4AVXVNNIAvailable reports whether the AVX2 q4x4 kernel can take
// AVX-VNNI's vpdpbusd ymm (it does, when chosen, on such CPUs).
func Q4x4AVXVNNIAvailable() bool { return C.emv_q4x4_avxvnni_available() != 0 }

// Q4x4Size is the size of the q4x4 copy of a rows x k Q4_0 matrix (0 when
// k is not a positive multiple of QK or rows < 1).
func Q4x4Size(rows, k int) int { return int(C.emv_q4x4_size(C.int64_t(rows), C.int64_t(k))) }

// Q4x4Groups is the number of 4-row groups of a matrix of rows rows.
func Q4x4Groups(rows int) int { return (rows + 3) / 4 }

// PackQ4x4Into writes groups [g0, g1) of the q4x4 copy of the plain Q4_0
// matrix at w (rows x k, rows ws bytes apart) into dst (Q4x4Size bytes;
// C or otherwise pinned memory: the caller keeps both alive).
func PackQ4x4Into(dst, w unsafe.Pointer, ws, rows, k, g0, g1 int) error {
	if C.emv_q4x4_pack(w, C.size_t(ws), C.int64_t(rows), C.int64_t(k), C.int64_t(g0), C.int64_t(g1), dst) != 0 {
		return fmt.Errorf("%w: q4x4 pack rows=%d k=%d groups [%d,%d)", ErrArgs, rows, k, g0, g1)
	}
	return nil
}

// PackQ4x4 makes the q4x4 copy of w, a plain Q4_0 matrix of rows x k.
func PackQ4x4(w []byte, rows, k int) (*Q4x4, error) {
	size := Q4x4Size(rows, k)
	ws := k / QK * Q4_0.BlockBytes()
	if size == 0 || len(w) < rows*ws {
		return nil, fmt.Errorf("%w: q4x4 rows=%d k=%d len(w)=%d", ErrArgs, rows, k, len(w))
	}
	p := &Q4x4{buf: make([]byte, size+64), rows: rows, k: k}
	p.off = int(-uintptr(unsafe.Pointer(&p.buf[0])) & 63)
	if err := PackQ4x4Into(unsafe.Pointer(&p.buf[p.off]), unsafe.Pointer(&w[0]), ws, rows, k, 0, Q4x4Groups(rows)); err != nil {
		return nil, err
	}
	return p, nil
}

// MulQ4x4 is Mul(best, Q4_0, w, rows, a, y, threads) on the q4x4 copy p of
// w: the same bits.
func MulQ4x4(p *Q4x4, a *Activations, y []float32, threads int) error {
	switch {
	case !Q4x4Available():
		return fmt.Errorf("%w: q4x4 kernel not available on this CPU", ErrArgs)
	case a.k != p.k || a.n < 1 || len(y) < a.n*p.rows:
		return fmt.Errorf("%w: q4x4 rows=%d k=%d, activations k=%d n=%d, len(y)=%d", ErrArgs, p.rows, p.k, a.k, a.n, len(y))
	}
	groups := Q4x4Groups(p.rows)
	if threads < 1 {
		threads = 1
	}
	if threads > groups {
		threads = groups
	}
	if threads == 1 {
		mulQ4x4Range(p, 0, p.rows, a, y)
		return nil
	}
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		r0, r1 := min(4*(groups*i/threads), p.rows), min(4*(groups*(i+1)/threads), p.rows)
		wg.Add(1)
		go func() { defer wg.Done(); mulQ4x4Range(p, r0, r1, a, y) }()
	}
	wg.Wait()
	return nil
}

func mulQ4x4Range(p *Q4x4, r0, r1 int, a *Activations, y []float32) {
	C.emv_q4x4_matvec(unsafe.Pointer(&p.buf[p.off]), C.int64_t(p.rows), C.int64_t(p.k), C.int64_t(r0), C.int64_t(r1),
		unsafe.Pointer(&a.buf[0]), C.size_t(a.k/QK*ActBlockBytes), C.int64_t(a.n), (*C.float)(unsafe.Pointer(&y[0])), C.size_t(p.rows))
}

// Q4x4CFunc is the C entry point emv_q4x4_matvec (matvec_q4x4.h) as a
// function pointer, for the ggml custom op in package kernels.
func Q4x4CFunc() unsafe.Pointer { return unsafe.Pointer(C.emv_q4x4_matvec) }

// Q4x4SplitCFunc is emv_q4x4_matvec_split (matvec_q4x4.h) as a function
// pointer, for the same op.
func Q4x4SplitCFunc() unsafe.Pointer { return unsafe.Pointer(C.emv_q4x4_matvec_split) }

// SplitBytes is EMV_SPLIT_BYTES: the zeroed state per graph node that
// emv_q4x4_matvec_split shares rows through.
const SplitBytes = C.EMV_SPLIT_BYTES

// mulQ4x4Split is thread ith of nth's emv_q4x4_matvec_split over every row
// of p, sharing rows through split (splitState): the units this thread
// computed, or -1 / -2 as the C function returns.
func mulQ4x4Split(p *Q4x4, a *Activations, y []float32, split unsafe.Pointer, ith, nth int) int {
	return int(C.emv_q4x4_matvec_split(unsafe.Pointer(&p.buf[p.off]), C.int64_t(p.rows), C.int64_t(p.k),
		unsafe.Pointer(&a.buf[0]), C.size_t(a.k/QK*ActBlockBytes), C.int64_t(a.n), (*C.float)(unsafe.Pointer(&y[0])),
		C.size_t(p.rows), split, C.int(ith), C.int(nth)))
}

// splitState is a zeroed emv_split in C memory (free with freeSplitState).
func splitState() unsafe.Pointer { return C.calloc(1, C.EMV_SPLIT_BYTES) }

func freeSplitState(s unsafe.Pointer) { C.free(s) }
