package matvec

/*
#include "matvec_f32.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// Float weight types (ggml's enum ggml_type values), taken by MulFloat with
// F32 activations; Mul's quantised path does not take them.
const (
	F32 Type = C.EMV_F32
	F16 Type = C.EMV_F16
)

// FloatLanes is the number of f32 accumulators of the float kernels'
// contract: element i of a row goes to lane i % FloatLanes.
const FloatLanes = C.EMVF_LANES

// SupportedFloat reports whether the float kernels take weights of ggml
// type t (F32 or F16).
func SupportedFloat(ggmlType int) bool { return ggmlType == int(F32) || ggmlType == int(F16) }

// elemBytes is the size of one float weight (0 for other types).
func (t Type) elemBytes() int {
	switch t {
	case F32:
		return 4
	case F16:
		return 2
	}
	return 0
}

// MulFloat computes y[j*rows+r] = W[r,:] . x[j,:] for the rows of W (F32 or
// F16 weights as little-endian bytes, rows*k elements, row-major) and the
// len(x)/k activation rows of x (any number; 8 per weight load), with impl
// on threads goroutines splitting the output rows. Row j of the result is
// bitwise the same for any number of rows, thread count and impl.
func MulFloat(impl Impl, t Type, w []byte, rows, k int, x, y []float32, threads int) error {
	es := t.elemBytes()
	n := len(x) / max(k, 1) // assigned once: the goroutines below capture it by value
	switch {
	case !available(impl):
		return fmt.Errorf("%w: %v not available on this CPU (best %v)", ErrArgs, impl, best)
	case es == 0:
		return fmt.Errorf("%w: float weight type %v", ErrArgs, t)
	case k < 1 || n < 1 || n*k != len(x) || rows < 1 || len(w) < rows*k*es || len(y) < n*rows:
		return fmt.Errorf("%w: rows=%d k=%d len(x)=%d len(w)=%d len(y)=%d", ErrArgs, rows, k, len(x), len(w), len(y))
	}
	threads = max(1, min(threads, rows))
	if threads == 1 {
		mulFloatRange(impl, t, w, k, 0, rows, x, n, y, rows)
		return nil
	}
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		r0, r1 := rows*i/threads, rows*(i+1)/threads
		wg.Add(1)
		go func() { defer wg.Done(); mulFloatRange(impl, t, w, k, r0, r1, x, n, y, rows) }()
	}
	wg.Wait()
	return nil
}

func mulFloatRange(impl Impl, t Type, w []byte, k, r0, r1 int, x []float32, n int, y []float32, rows int) {
	C.emv_matvec_f32(C.int(t), C.int(impl), unsafe.Pointer(&w[0]), C.size_t(k*t.elemBytes()), C.int64_t(k),
		C.int64_t(r0), C.int64_t(r1), (*C.float)(unsafe.Pointer(&x[0])), C.size_t(4*k), C.int64_t(n),
		(*C.float)(unsafe.Pointer(&y[0])), C.size_t(rows))
}

// CFuncFloat is the C entry point emv_matvec_f32 (see matvec_f32.h) as a
// function pointer, for the ggml custom op in package kernels.
func CFuncFloat() unsafe.Pointer { return unsafe.Pointer(C.emv_matvec_f32) }

// FloatSplitCFunc is emv_matvec_f32_split (matvec_f32.h) as a function
// pointer, for the same op: the pool's threads share the rows through a
// per-node state of SplitBytes.
func FloatSplitCFunc() unsafe.Pointer { return unsafe.Pointer(C.emv_matvec_f32_split) }

// mulFloatSplit is thread ith of nth's emv_matvec_f32_split over every row
// of w with the len(x)/k rows of x, sharing rows through split
// (splitState): the units this thread computed, or -1 / -2.
func mulFloatSplit(impl Impl, t Type, w []byte, rows, k int, x, y []float32, split unsafe.Pointer, ith, nth int) int {
	return int(C.emv_matvec_f32_split(C.int(t), C.int(impl), unsafe.Pointer(&w[0]), C.size_t(k*t.elemBytes()),
		C.int64_t(rows), C.int64_t(k), (*C.float)(unsafe.Pointer(&x[0])), C.size_t(4*k), C.int64_t(len(x)/k),
		(*C.float)(unsafe.Pointer(&y[0])), C.size_t(rows), split, C.int(ith), C.int(nth)))
}
