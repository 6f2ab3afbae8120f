package kernels

/*
#include <stdlib.h>
#include "ggml.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// ErrQuantizeArgs: QuantizeRows rejected its arguments before calling ggml.
var ErrQuantizeArgs = errors.New("quantize rows: invalid argument")

// quantizable lists the types ggml_quantize_chunk handles without an
// importance matrix (its switch asserts on anything else, and IQ2_XXS, IQ2_XS,
// IQ1_S and IQ1_M require one).
var quantizable = map[uint32]bool{
	C.GGML_TYPE_F32: true, C.GGML_TYPE_F16: true, C.GGML_TYPE_BF16: true,
	C.GGML_TYPE_Q4_0: true, C.GGML_TYPE_Q4_1: true, C.GGML_TYPE_Q5_0: true,
	C.GGML_TYPE_Q5_1: true, C.GGML_TYPE_Q8_0: true, C.GGML_TYPE_MXFP4: true,
	C.GGML_TYPE_Q2_K: true, C.GGML_TYPE_Q3_K: true, C.GGML_TYPE_Q4_K: true,
	C.GGML_TYPE_Q5_K: true, C.GGML_TYPE_Q6_K: true, C.GGML_TYPE_TQ1_0: true,
	C.GGML_TYPE_TQ2_0: true, C.GGML_TYPE_IQ4_NL: true, C.GGML_TYPE_IQ4_XS: true,
	C.GGML_TYPE_IQ3_XXS: true, C.GGML_TYPE_IQ3_S: true, C.GGML_TYPE_IQ2_S: true,
}

// Quantizable reports whether QuantizeRows accepts type t (a ggml_type value).
func Quantizable(t uint32) bool {
	return quantizable[t] && !bool(C.ggml_quantize_requires_imatrix(C.enum_ggml_type(t)))
}

// QuantRowSize is ggml_row_size(t, n): the bytes of a row of n elements of
// type t. n must be a positive multiple of t's block size.
func QuantRowSize(t uint32, n int) (int, error) {
	if t >= C.GGML_TYPE_COUNT || C.ggml_blck_size(C.enum_ggml_type(t)) <= 0 {
		return 0, fmt.Errorf("%w: unknown ggml type %d", ErrQuantizeArgs, t)
	}
	bs := int(C.ggml_blck_size(C.enum_ggml_type(t)))
	if n <= 0 || n%bs != 0 {
		return 0, fmt.Errorf("%w: row of %d elements is not a positive multiple of %s's block size %d",
			ErrQuantizeArgs, n, GGMLType(t), bs)
	}
	return int(C.ggml_row_size(C.enum_ggml_type(t), C.int64_t(n))), nil
}

// QuantizeRows converts nrows rows of nPerRow float32 from src into type t
// (a ggml_type value: F32, F16, BF16, Q4_0, Q8_0, Q4_K, ...) in dst with
// ggml_quantize_chunk (no importance matrix), and returns the bytes written,
// nrows*QuantRowSize(t, nPerRow). Every argument is checked before calling
// C: t must be Quantizable, nPerRow a multiple of its block size, src at
// least nrows*nPerRow floats and dst at least the result's size. It is safe
// to call from several goroutines on disjoint buffers.
func QuantizeRows(t uint32, src []float32, dst []byte, nrows, nPerRow int) (int, error) {
	if !Quantizable(t) {
		return 0, fmt.Errorf("%w: type %s (%d) cannot be quantized without an importance matrix or is unknown",
			ErrQuantizeArgs, GGMLType(t), t)
	}
	if nrows <= 0 {
		return 0, fmt.Errorf("%w: %d rows", ErrQuantizeArgs, nrows)
	}
	rowSize, err := QuantRowSize(t, nPerRow)
	if err != nil {
		return 0, err
	}
	if nrows > len(src)/nPerRow {
		return 0, fmt.Errorf("%w: src has %d floats, need %d rows × %d", ErrQuantizeArgs, len(src), nrows, nPerRow)
	}
	if nrows > len(dst)/rowSize {
		return 0, fmt.Errorf("%w: dst has %d bytes, need %d rows × %d", ErrQuantizeArgs, len(dst), nrows, rowSize)
	}
	n := C.ggml_quantize_chunk(C.enum_ggml_type(t), (*C.float)(unsafe.Pointer(&src[0])), unsafe.Pointer(&dst[0]),
		0, C.int64_t(nrows), C.int64_t(nPerRow), nil)
	if int(n) != nrows*rowSize {
		return int(n), fmt.Errorf("quantize rows: ggml wrote %d bytes, want %d", int(n), nrows*rowSize)
	}
	return int(n), nil
}
