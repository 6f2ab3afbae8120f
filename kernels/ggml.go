package kernels

/*
#include <stdlib.h>
#include "ggml.h"
#include "ggml-cpu.h"

// Calls a type's to_float function pointer (cgo cannot call C function pointers).
static void edgellm_dequantize_row(ggml_to_float_t f, const void * x, float * y, int64_t k) { f(x, y, k); }
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// This file is the core of the ggml binding: element types, metadata contexts
// and tensors. Ops are in ggml_ops.go, backends, buffers, the threadpool, the
// graph allocator and graph compute in ggml_backend.go.
//
// ggml aborts the process (GGML_ASSERT) on a shape or type it does not accept.
// The binding therefore validates what it cheaply can before calling C, and
// callers (the native engine) validate model shapes once, at load, so that
// graph building never reaches an assert.

// GGMLType is a ggml element type (enum ggml_type); GGUF tensor types use the
// same values.
type GGMLType int32

// ggml element types used by the project. The values are ggml's.
const (
	GGMLTypeF32  GGMLType = C.GGML_TYPE_F32
	GGMLTypeF16  GGMLType = C.GGML_TYPE_F16
	GGMLTypeQ4_0 GGMLType = C.GGML_TYPE_Q4_0
	GGMLTypeQ4_1 GGMLType = C.GGML_TYPE_Q4_1
	GGMLTypeQ5_0 GGMLType = C.GGML_TYPE_Q5_0
	GGMLTypeQ5_1 GGMLType = C.GGML_TYPE_Q5_1
	GGMLTypeQ8_0 GGMLType = C.GGML_TYPE_Q8_0
	GGMLTypeQ2_K GGMLType = C.GGML_TYPE_Q2_K
	GGMLTypeQ3_K GGMLType = C.GGML_TYPE_Q3_K
	GGMLTypeQ4_K GGMLType = C.GGML_TYPE_Q4_K
	GGMLTypeQ5_K GGMLType = C.GGML_TYPE_Q5_K
	GGMLTypeQ6_K GGMLType = C.GGML_TYPE_Q6_K
	GGMLTypeI32  GGMLType = C.GGML_TYPE_I32
	GGMLTypeI64  GGMLType = C.GGML_TYPE_I64
	GGMLTypeBF16 GGMLType = C.GGML_TYPE_BF16

	ggmlTypeCount = C.GGML_TYPE_COUNT
)

// Valid reports whether t is a type this ggml build knows (it has a name and a
// non-zero block size). Types removed from ggml (4, 5, 31–33, 36–38) are invalid.
func (t GGMLType) Valid() bool {
	if t < 0 || t >= ggmlTypeCount {
		return false
	}
	return C.ggml_blck_size(C.enum_ggml_type(t)) > 0 && C.ggml_type_size(C.enum_ggml_type(t)) > 0
}

// String is ggml's name of the type ("f32", "q4_0", ...).
func (t GGMLType) String() string {
	if !t.Valid() {
		return fmt.Sprintf("ggml_type(%d)", int32(t))
	}
	return C.GoString(C.ggml_type_name(C.enum_ggml_type(t)))
}

// BlockSize is the number of elements in one block (32 for Q4_0/Q8_0, 1 for F32).
func (t GGMLType) BlockSize() int64 { return int64(C.ggml_blck_size(C.enum_ggml_type(t))) }

// TypeSize is the size in bytes of one block.
func (t GGMLType) TypeSize() int64 { return int64(C.ggml_type_size(C.enum_ggml_type(t))) }

// RowSize is the size in bytes of a row of n elements; n must be a multiple of
// BlockSize (check with RowOK).
func (t GGMLType) RowSize(n int64) int64 { return n / t.BlockSize() * t.TypeSize() }

// RowOK reports whether a row of n elements can be stored in this type.
func (t GGMLType) RowOK(n int64) bool { return t.Valid() && n > 0 && n%t.BlockSize() == 0 }

// Quantized reports whether t is a block-quantized type.
func (t GGMLType) Quantized() bool {
	return t.Valid() && bool(C.ggml_is_quantized(C.enum_ggml_type(t)))
}

// CPUMatMulOK reports whether the ggml CPU backend can use t as the weight
// (src0) of a matrix multiplication: it has a vec_dot kernel.
func (t GGMLType) CPUMatMulOK() bool {
	if !t.Valid() || t == GGMLTypeI32 || t == GGMLTypeI64 {
		return false
	}
	tr := C.ggml_get_type_traits_cpu(C.enum_ggml_type(t))
	return tr != nil && tr.vec_dot != nil
}

// ErrGGML is the class of ggml binding errors; every error returned here wraps it.
var ErrGGML = errors.New("ggml")

// ggmlErr formats an error that wraps ErrGGML.
func ggmlErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrGGML, fmt.Sprintf(format, args...))
}

// GGMLContext is a ggml context used for tensor and graph metadata only
// (no_alloc): tensor data lives in backend buffers (mmap'd weights, the KV
// arena, the graph allocator's buffer). Close frees the metadata; tensors made
// in the context must not be used afterwards.
type GGMLContext struct {
	p   *C.struct_ggml_context
	err error // first error recorded by an op (see Err)
	// The last Q8_0 cast of an activation tensor for edgellm's kernels
	// (castQ8): matmuls of one input share it.
	castSrc, castQ8 *C.struct_ggml_tensor
}

// NewGGMLContext creates a metadata context sized for up to maxTensors tensors
// and, when maxGraphNodes > 0, one graph of that many nodes.
func NewGGMLContext(maxTensors, maxGraphNodes int) (*GGMLContext, error) {
	if maxTensors <= 0 || maxGraphNodes < 0 {
		return nil, ggmlErr("context: bad sizes (tensors %d, graph nodes %d)", maxTensors, maxGraphNodes)
	}
	size := C.size_t(maxTensors) * C.ggml_tensor_overhead()
	if maxGraphNodes > 0 {
		size += C.ggml_graph_overhead_custom(C.size_t(maxGraphNodes), false)
	}
	p := C.ggml_init(C.struct_ggml_init_params{mem_size: size, mem_buffer: nil, no_alloc: true})
	if p == nil {
		return nil, ggmlErr("ggml_init(%d bytes) failed", size)
	}
	return &GGMLContext{p: p}, nil
}

// Close frees the context. Safe to call twice.
func (c *GGMLContext) Close() error {
	if c != nil && c.p != nil {
		C.ggml_free(c.p)
		c.p = nil
	}
	return nil
}

// Reset forgets every tensor and graph in the context, keeping its memory, so
// a graph can be rebuilt without allocating.
func (c *GGMLContext) Reset() { C.ggml_reset(c.p); c.err, c.castSrc, c.castQ8 = nil, nil, nil }

// FreeBytes is how much metadata memory is left; a builder that checks it
// before adding tensors never hits ggml's out-of-memory abort.
func (c *GGMLContext) FreeBytes() int64 {
	return int64(C.ggml_get_mem_size(c.p)) - int64(C.ggml_used_mem(c.p))
}

// TensorOverhead is the metadata size of one tensor.
func TensorOverhead() int64 { return int64(C.ggml_tensor_overhead()) }

// Tensor is a ggml tensor owned by a GGMLContext. It is a plain pointer
// wrapper: copying it is free and the zero Tensor is "none" (for optional
// operands such as a mask or RoPE frequency factors).
type Tensor struct {
	p *C.struct_ggml_tensor
}

// Nil reports whether t is the zero (absent) tensor.
func (t Tensor) Nil() bool { return t.p == nil }

// NewTensor creates a tensor of type typ and shape ne (ne[0] first, 1–4 dims).
func (c *GGMLContext) NewTensor(typ GGMLType, ne ...int64) (Tensor, error) {
	if len(ne) < 1 || len(ne) > 4 {
		return Tensor{}, ggmlErr("new tensor: %d dims (want 1-4)", len(ne))
	}
	if !typ.Valid() {
		return Tensor{}, ggmlErr("new tensor: invalid type %d", int32(typ))
	}
	for _, n := range ne {
		if n <= 0 {
			return Tensor{}, ggmlErr("new tensor: bad shape %v", slices.Clone(ne)) // a copy: ne stays on the caller's stack
		}
	}
	if !typ.RowOK(ne[0]) {
		return Tensor{}, ggmlErr("new tensor: row of %d elements is not a multiple of %s's block size %d", ne[0], typ, typ.BlockSize())
	}
	if c.FreeBytes() < TensorOverhead() {
		return Tensor{}, ggmlErr("new tensor: context full")
	}
	// By dimension count, not ggml_new_tensor(..., &dims): a Go array
	// passed to C escapes to the heap, one allocation per tensor of every
	// graph rebuild.
	t := C.enum_ggml_type(typ)
	switch len(ne) {
	case 1:
		return Tensor{C.ggml_new_tensor_1d(c.p, t, C.int64_t(ne[0]))}, nil
	case 2:
		return Tensor{C.ggml_new_tensor_2d(c.p, t, C.int64_t(ne[0]), C.int64_t(ne[1]))}, nil
	case 3:
		return Tensor{C.ggml_new_tensor_3d(c.p, t, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]))}, nil
	}
	return Tensor{C.ggml_new_tensor_4d(c.p, t, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3]))}, nil
}

// Type is the tensor's element type.
func (t Tensor) Type() GGMLType { return GGMLType(t.p._type) }

// Ne returns the number of elements in dimension i (0–3).
func (t Tensor) Ne(i int) int64 { return int64(t.p.ne[i]) }

// Nb returns the stride in bytes of dimension i (0–3).
func (t Tensor) Nb(i int) int64 { return int64(t.p.nb[i]) }

// Nbytes is the size of the tensor's data in bytes.
func (t Tensor) Nbytes() int64 { return int64(C.ggml_nbytes(t.p)) }

// Nelements is the number of elements.
func (t Tensor) Nelements() int64 { return int64(C.ggml_nelements(t.p)) }

// Data is the tensor's data pointer (nil before it is allocated).
func (t Tensor) Data() unsafe.Pointer { return t.p.data }

// Allocated reports whether the tensor has data (or is a view of one that has).
func (t Tensor) Allocated() bool { return t.p.data != nil }

// SetName names the tensor (for debugging and graph dumps).
func (t Tensor) SetName(name string) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	C.ggml_set_name(t.p, cs)
}

// Name returns the tensor's name.
func (t Tensor) Name() string { return C.GoString(&t.p.name[0]) }

// SetInput marks the tensor as a graph input: the graph allocator gives it
// its own memory, written by the caller before compute.
func (t Tensor) SetInput() { C.ggml_set_input(t.p) }

// SetOutput marks the tensor as a graph output: its memory is not reused by
// later nodes, so it can be read after compute.
func (t Tensor) SetOutput() { C.ggml_set_output(t.p) }

// Float32s returns the data of an allocated, contiguous F32 tensor as a slice
// aliasing host memory (CPU buffers only). It does not allocate.
func (t Tensor) Float32s() []float32 {
	if t.p.data == nil || t.Type() != GGMLTypeF32 || !bool(C.ggml_is_contiguous(t.p)) {
		return nil
	}
	return unsafe.Slice((*float32)(t.p.data), t.Nelements())
}

// Int32s is Float32s for I32 tensors.
func (t Tensor) Int32s() []int32 {
	if t.p.data == nil || t.Type() != GGMLTypeI32 || !bool(C.ggml_is_contiguous(t.p)) {
		return nil
	}
	return unsafe.Slice((*int32)(t.p.data), t.Nelements())
}

// Int64s is Float32s for I64 tensors.
func (t Tensor) Int64s() []int64 {
	if t.p.data == nil || t.Type() != GGMLTypeI64 || !bool(C.ggml_is_contiguous(t.p)) {
		return nil
	}
	return unsafe.Slice((*int64)(t.p.data), t.Nelements())
}

// Uint16s returns the raw data of an allocated contiguous F16 tensor.
func (t Tensor) Uint16s() []uint16 {
	if t.p.data == nil || t.Type() != GGMLTypeF16 || !bool(C.ggml_is_contiguous(t.p)) {
		return nil
	}
	return unsafe.Slice((*uint16)(t.p.data), t.Nelements())
}

// Contiguous reports whether the tensor's elements are densely packed.
func (t Tensor) Contiguous() bool { return bool(C.ggml_is_contiguous(t.p)) }

// F16 bit patterns used to fill attention masks from Go.
const (
	F16Zero   uint16 = 0x0000
	F16NegInf uint16 = 0xfc00
)

// FP32ToFP16Row converts src to IEEE half floats in dst (len(dst) ≥ len(src)).
func FP32ToFP16Row(src []float32, dst []uint16) {
	if len(src) == 0 {
		return
	}
	if len(dst) < len(src) {
		panic("kernels: FP32ToFP16Row: dst too short")
	}
	C.ggml_fp32_to_fp16_row((*C.float)(unsafe.Pointer(&src[0])), (*C.ggml_fp16_t)(unsafe.Pointer(&dst[0])), C.int64_t(len(src)))
}

// FP16ToFP32Row converts half floats back to float32.
func FP16ToFP32Row(src []uint16, dst []float32) {
	if len(src) == 0 {
		return
	}
	if len(dst) < len(src) {
		panic("kernels: FP16ToFP32Row: dst too short")
	}
	C.ggml_fp16_to_fp32_row((*C.ggml_fp16_t)(unsafe.Pointer(&src[0])), (*C.float)(unsafe.Pointer(&dst[0])), C.int64_t(len(src)))
}

// DequantizeRow converts n elements of type typ at src (raw block data) to
// float32 in dst. n must be a multiple of typ's block size and src must hold
// RowSize(n) bytes.
func DequantizeRow(typ GGMLType, src []byte, dst []float32) error {
	n := int64(len(dst))
	if !typ.RowOK(n) || int64(len(src)) < typ.RowSize(n) {
		return ggmlErr("dequantize %s: %d bytes for %d elements", typ, len(src), n)
	}
	tr := C.ggml_get_type_traits(C.enum_ggml_type(typ))
	if typ == GGMLTypeF32 {
		copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), n))
		return nil
	}
	if tr == nil || tr.to_float == nil {
		return ggmlErr("dequantize: no to_float for %s", typ)
	}
	C.edgellm_dequantize_row(tr.to_float, unsafe.Pointer(&src[0]), (*C.float)(unsafe.Pointer(&dst[0])), C.int64_t(n))
	return nil
}
