package matvec

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include "matvec.h"
#include "emv_split.h"
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

// The implementations, in order of preference on each architecture (x86-64:
// Scalar, AVX2, AVX512VNNI; arm64: Scalar, NEONDot, NEON with the dot
// product extension, SDOT; NEONI8MM, NEON with the int8 matrix multiply,
// SMMLA). Scalar8 is the reference of the second contract (C8, the one
// NEONI8MM follows), portable C on every architecture, never Best.
const (
	Scalar     Impl = C.EMV_SCALAR
	AVX2       Impl = C.EMV_AVX2
	AVX512VNNI Impl = C.EMV_AVX512VNNI
	NEONDot    Impl = C.EMV_NEONDOT
	Scalar8    Impl = C.EMV_SCALAR8
	NEONI8MM   Impl = C.EMV_NEONI8MM
	QK              = 32 // elements per block
	MaxN            = 8  // activation rows one weight load serves
	// ActBlockBytes is the size of one quantised activation block (ggml's
	// block_q8_0).
	ActBlockBytes = C.EMV_Q8_BYTES
)

func (i Impl) String() string {
	switch i {
	case Scalar:
		return "scalar"
	case AVX2:
		return "avx2"
	case AVX512VNNI:
		return "avx512vnni"
	case NEONDot:
		return "neondot"
	case Scalar8:
		return "scalar8"
	case NEONI8MM:
		return "neoni8mm"
	}
	return fmt.Sprintf("impl(%d)", int(i))
}

// Contract names an arithmetic contract of the quantised kernels (doc.go):
// the number of consecutive products in each exact int32 lane. Every
// implementation of a contract returns its reference's bits; the two
// contracts differ in the last bits.
type Contract int

const (
	C4 Contract = 4 // eight lanes of 4 products: Scalar, AVX2, AVX512VNNI, NEONDot
	C8 Contract = 8 // four lanes of 8 products: Scalar8, NEONI8MM
)

func (c Contract) String() string { return fmt.Sprintf("C%d", int(c)) }

// Reference is the contract's portable scalar implementation (available
// on every CPU).
func (c Contract) Reference() Impl {
	if c == C8 {
		return Scalar8
	}
	return Scalar
}

// Contract is the arithmetic contract i follows.
func (i Impl) Contract() Contract {
	if i == Scalar8 || i == NEONI8MM {
		return C8
	}
	return C4
}

// Reference is the implementation whose bits i returns: its contract's
// scalar reference.
func (i Impl) Reference() Impl { return i.Contract().Reference() }

var best = Impl(C.emv_best_impl())

// Best is the fastest implementation this CPU runs (chosen at start-up:
// cpuid on x86-64, getauxval(AT_HWCAP, AT_HWCAP2) on arm64). The ggml
// custom op always runs Best, so a graph uses one contract throughout:
// Best().Reference() is the reference its results match.
func Best() Impl { return best }

// allImpls is every implementation of every architecture, slowest first
// within each contract.
var allImpls = []Impl{Scalar, AVX2, AVX512VNNI, NEONDot, Scalar8, NEONI8MM}

// available reports whether this CPU runs impl.
func available(impl Impl) bool { return C.emv_impl_available(C.int(impl)) != 0 }

// Available lists the implementations this CPU runs, slowest first.
func Available() []Impl {
	var out []Impl
	for _, i := range allImpls {
		if available(i) {
			out = append(out, i)
		}
	}
	return out
}

// Type is a weight type the kernels take; the values are ggml's enum
// ggml_type.
type Type int

// Weight types (ggml block layouts).
const (
	Q4_0 Type = C.EMV_Q4_0
	Q8_0 Type = C.EMV_Q8_0
)

func (t Type) String() string {
	switch t {
	case Q4_0:
		return "q4_0"
	case Q8_0:
		return "q8_0"
	case F32:
		return "f32"
	case F16:
		return "f16"
	}
	return fmt.Sprintf("type(%d)", int(t))
}

// BlockBytes is the size of one weight block of t (0 for other types).
func (t Type) BlockBytes() int {
	switch t {
	case Q4_0:
		return C.EMV_Q4_BYTES
	case Q8_0:
		return C.EMV_Q8_BYTES
	}
	return 0
}

// Supported reports whether the kernels take weights of ggml type t.
func Supported(ggmlType int) bool { return Type(ggmlType).BlockBytes() != 0 }

// ErrArgs: a kernel call's arguments do not fit together.
var ErrArgs = errors.New("matvec: invalid arguments")

// Activations holds up to MaxN activation rows of k elements, quantised to
// ggml's Q8_0 blocks exactly as ggml quantises a mul_mat's vector operand.
type Activations struct {
	buf []byte
	k   int
	n   int
}

// NewActivations allocates room for MaxN rows of k elements (k % QK == 0).
func NewActivations(k int) (*Activations, error) {
	if k <= 0 || k%QK != 0 {
		return nil, fmt.Errorf("%w: k=%d not a positive multiple of %d", ErrArgs, k, QK)
	}
	return &Activations{buf: make([]byte, MaxN*k/QK*ActBlockBytes), k: k}, nil
}

// Set quantises len(x)/k rows (1..MaxN) of x into a.
func (a *Activations) Set(x []float32) error {
	n := len(x) / a.k
	if n < 1 || n > MaxN || n*a.k != len(x) {
		return fmt.Errorf("%w: %d values are not 1..%d rows of %d", ErrArgs, len(x), MaxN, a.k)
	}
	C.emv_quantize_q8_0((*C.float)(unsafe.Pointer(&x[0])), C.int(n), C.int(a.k), unsafe.Pointer(&a.buf[0]))
	a.n = n
	return nil
}

// N is the number of rows Set last quantised.
func (a *Activations) N() int { return a.n }

// Bytes is the quantised rows (N()*k/QK blocks of ActBlockBytes).
func (a *Activations) Bytes() []byte { return a.buf[:a.n*a.k/QK*ActBlockBytes] }

// Mul computes y[j*rows+r] = W[r,:] . x[j,:] for the rows of W (ggml blocks
// of t, rows*k/QK blocks, row-major) and the a.N() activation rows, with impl
// on threads goroutines splitting the output rows.
func Mul(impl Impl, t Type, w []byte, rows int, a *Activations, y []float32, threads int) error {
	nb := a.k / QK
	ws := nb * t.BlockBytes()
	switch {
	case !available(impl):
		return fmt.Errorf("%w: %v not available on this CPU (best %v)", ErrArgs, impl, best)
	case t.BlockBytes() == 0:
		return fmt.Errorf("%w: weight type %v", ErrArgs, t)
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
		mulRange(impl, t, w, ws, 0, rows, a, y, rows)
		return nil
	}
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		r0, r1 := rows*i/threads, rows*(i+1)/threads
		wg.Add(1)
		go func() { defer wg.Done(); mulRange(impl, t, w, ws, r0, r1, a, y, rows) }()
	}
	wg.Wait()
	return nil
}

// mulRange runs the kernel on output rows [r0, r1) (a named function, not a
// closure, so a one-thread call allocates nothing).
func mulRange(impl Impl, t Type, w []byte, ws, r0, r1 int, a *Activations, y []float32, rows int) {
	C.emv_matvec(C.int(t), C.int(impl), unsafe.Pointer(&w[0]), C.size_t(ws), C.int64_t(a.k), C.int64_t(r0), C.int64_t(r1),
		unsafe.Pointer(&a.buf[0]), C.size_t(a.k/QK*ActBlockBytes), C.int64_t(a.n), (*C.float)(unsafe.Pointer(&y[0])), C.size_t(rows))
}

// CFunc is the C entry point emv_matvec (see matvec.h) as a function
// pointer, for the ggml custom op in package kernels, which calls it from
// ggml's worker threads without entering Go.
func CFunc() unsafe.Pointer { return unsafe.Pointer(C.emv_matvec) }

// SplitCFunc is emv_matvec_split (matvec.h) as a function pointer, for the
// same op: the pool's threads share the rows through a per-node state of
// SplitBytes.
func SplitCFunc() unsafe.Pointer { return unsafe.Pointer(C.emv_matvec_split) }

// splitMaxThreads is EMV_SPLIT_MAX: calls from larger pools split statically.
const splitMaxThreads = C.EMV_SPLIT_MAX

// mulSplit is thread ith of nth's emv_matvec_split over every row of w,
// sharing rows through split (splitState): the units this thread computed,
// or -1 / -2 as the C function returns.
func mulSplit(impl Impl, t Type, w []byte, rows int, a *Activations, y []float32, split unsafe.Pointer, ith, nth int) int {
	return int(C.emv_matvec_split(C.int(t), C.int(impl), unsafe.Pointer(&w[0]), C.size_t(a.k/QK*t.BlockBytes()),
		C.int64_t(rows), C.int64_t(a.k), unsafe.Pointer(&a.buf[0]), C.size_t(a.k/QK*ActBlockBytes), C.int64_t(a.n),
		(*C.float)(unsafe.Pointer(&y[0])), C.size_t(rows), split, C.int(ith), C.int(nth)))
}
