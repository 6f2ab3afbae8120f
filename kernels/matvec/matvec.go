package matvec

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include "matvec.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Impl names one implementation of the kernels.
type Impl int

// The implementations, in order of preference.
const (
	Scalar      Impl = C.EMV_SCALAR
	AVX2        Impl = C.EMV_AVX2
	AVX512VNNI  Impl = C.EMV_AVX512VNNI
	QK               = 32 // elements per block
	MaxN             = 8  // activation rows per call
	xblockBytes      = 40 // sizeof(emv_xblock)
)

func (i Impl) String() string {
	switch i {
	case Scalar:
		return "scalar"
	case AVX2:
		return "avx2"
	case AVX512VNNI:
		return "avx512vnni"
	}
	return fmt.Sprintf("impl(%d)", int(i))
}

var best = Impl(C.emv_best_impl())

// Best is the fastest implementation this CPU runs (cpuid at start-up).
func Best() Impl { return best }

// Available lists the implementations this CPU runs, slowest first.
func Available() []Impl {
	var out []Impl
	for i := Scalar; i <= best; i++ {
		out = append(out, i)
	}
	return out
}

// Type is a weight type the kernels take.
type Type int

// Weight types (ggml block layouts).
const (
	Q8_0 Type = iota
	Q4_0
)

func (t Type) String() string {
	if t == Q4_0 {
		return "q4_0"
	}
	return "q8_0"
}

// BlockBytes is the size of one weight block of t.
func (t Type) BlockBytes() int {
	if t == Q4_0 {
		return 18
	}
	return 34
}

// ErrArgs: a kernel call's arguments do not fit together.
var ErrArgs = errors.New("matvec: invalid arguments")

// Activations holds up to MaxN quantised activation rows of k elements.
type Activations struct {
	buf []C.emv_xblock
	k   int
	n   int
}

// NewActivations allocates room for MaxN rows of k elements (k % QK == 0).
func NewActivations(k int) (*Activations, error) {
	if k <= 0 || k%QK != 0 {
		return nil, fmt.Errorf("%w: k=%d not a positive multiple of %d", ErrArgs, k, QK)
	}
	if unsafe.Sizeof(C.emv_xblock{}) != xblockBytes {
		return nil, fmt.Errorf("%w: activation block of %d bytes", ErrArgs, unsafe.Sizeof(C.emv_xblock{}))
	}
	return &Activations{buf: make([]C.emv_xblock, MaxN*k/QK), k: k}, nil
}

// Set quantises len(x)/k rows (1..MaxN) of x into a.
func (a *Activations) Set(x []float32) error {
	n := len(x) / a.k
	if n < 1 || n > MaxN || n*a.k != len(x) {
		return fmt.Errorf("%w: %d values are not 1..%d rows of %d", ErrArgs, len(x), MaxN, a.k)
	}
	nb := a.k / QK
	for j := 0; j < n; j++ {
		C.emv_quantize_x((*C.float)(unsafe.Pointer(&x[j*a.k])), &a.buf[j*nb], C.int(a.k))
	}
	a.n = n
	return nil
}

// N is the number of rows Set last quantised.
func (a *Activations) N() int { return a.n }

// Mul computes y[j*rows+r] = W[r,:] . x[j,:] for the rows of W (ggml blocks
// of t, rows*k/QK blocks, row-major) and the a.N() activation rows, with impl
// on threads goroutines splitting the output rows.
func Mul(impl Impl, t Type, w []byte, rows int, a *Activations, y []float32, threads int) error {
	nb := a.k / QK
	ws := nb * t.BlockBytes()
	switch {
	case impl < Scalar || impl > best:
		return fmt.Errorf("%w: %v not available on this CPU (best %v)", ErrArgs, impl, best)
	case a.n < 1 || rows < 1 || len(w) < rows*ws || len(y) < a.n*rows:
		return fmt.Errorf("%w: rows=%d k=%d n=%d len(w)=%d len(y)=%d", ErrArgs, rows, a.k, a.n, len(w), len(y))
	}
	if threads < 1 {
		threads = 1
	}
	if threads > rows {
		threads = rows
	}
	if threads == 1 {
		mulRange(impl, t, w, ws, nb, 0, rows, a, y, rows)
		return nil
	}
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		r0, r1 := rows*i/threads, rows*(i+1)/threads
		wg.Add(1)
		go func() { defer wg.Done(); mulRange(impl, t, w, ws, nb, r0, r1, a, y, rows) }()
	}
	wg.Wait()
	return nil
}

// mulRange runs the kernel on output rows [r0, r1) (a named function, not a
// closure, so a one-thread call allocates nothing).
func mulRange(impl Impl, t Type, w []byte, ws, nb, r0, r1 int, a *Activations, y []float32, rows int) {
	wp, yp := unsafe.Pointer(&w[0]), (*C.float)(unsafe.Pointer(&y[0]))
	if t == Q4_0 {
		C.emv_mul_q4_0(C.int(impl), wp, C.long(ws), C.int(nb), C.int(r0), C.int(r1), &a.buf[0], C.int(a.n), yp, C.long(rows))
		return
	}
	C.emv_mul_q8_0(C.int(impl), wp, C.long(ws), C.int(nb), C.int(r0), C.int(r1), &a.buf[0], C.int(a.n), yp, C.long(rows))
}
