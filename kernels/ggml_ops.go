package kernels

/*
#include "ggml.h"
*/
import "C"

import "slices"

// Graph ops. Each op appends a node to the context and returns the result
// tensor. Ops never return an error themselves: the first invalid operand
// (a shape ggml would abort on, a full context, a missing tensor) is recorded
// in the context and every later op returns the zero Tensor, so a graph
// builder checks Err once at the end (like bufio.Scanner). Nothing here
// allocates Go memory.

// Err returns the first error recorded while building ops, or nil.
func (c *GGMLContext) Err() error { return c.err }

// ClearErr forgets a recorded error (after Reset).
func (c *GGMLContext) ClearErr() { c.err = nil }

// fail records the first error and returns the zero Tensor.
func (c *GGMLContext) fail(format string, args ...any) Tensor {
	if c.err == nil {
		c.err = ggmlErr(format, args...)
	}
	return Tensor{}
}

// ok checks that the context has room for one more node and that the
// operands exist.
func (c *GGMLContext) ok(op string, ts ...Tensor) bool {
	if c.err != nil {
		return false
	}
	for _, t := range ts {
		if t.p == nil {
			c.fail("%s: missing operand", op)
			return false
		}
	}
	if c.FreeBytes() < TensorOverhead() {
		c.fail("%s: context full", op)
		return false
	}
	return true
}

// GetRows gathers rows of a (e.g. the token embedding) by the I32 indices in ids.
func (c *GGMLContext) GetRows(a, ids Tensor) Tensor {
	if !c.ok("get_rows", a, ids) {
		return Tensor{}
	}
	if ids.Type() != GGMLTypeI32 {
		return c.fail("get_rows: indices are %s, want i32", ids.Type())
	}
	return Tensor{C.ggml_get_rows(c.p, a.p, ids.p)}
}

// RMSNorm normalises each row of a by its root mean square.
func (c *GGMLContext) RMSNorm(a Tensor, eps float32) Tensor {
	if !c.ok("rms_norm", a) {
		return Tensor{}
	}
	return Tensor{C.ggml_rms_norm(c.p, a.p, C.float(eps))}
}

// canRepeat reports whether b broadcasts to a's shape.
func canRepeat(b, a Tensor) bool {
	for i := 0; i < 4; i++ {
		if b.Ne(i) == 0 || a.Ne(i)%b.Ne(i) != 0 {
			return false
		}
	}
	return true
}

// Mul is the element-wise product a*b, b broadcast over a.
func (c *GGMLContext) Mul(a, b Tensor) Tensor {
	if !c.ok("mul", a, b) {
		return Tensor{}
	}
	if !canRepeat(b, a) {
		return c.fail("mul: %v does not broadcast to %v", shape(b), shape(a))
	}
	return Tensor{C.ggml_mul(c.p, a.p, b.p)}
}

// Add is the element-wise sum a+b, b broadcast over a.
func (c *GGMLContext) Add(a, b Tensor) Tensor {
	if !c.ok("add", a, b) {
		return Tensor{}
	}
	if !canRepeat(b, a) {
		return c.fail("add: %v does not broadcast to %v", shape(b), shape(a))
	}
	return Tensor{C.ggml_add(c.p, a.p, b.p)}
}

// Scale multiplies a by s.
func (c *GGMLContext) Scale(a Tensor, s float32) Tensor {
	if !c.ok("scale", a) {
		return Tensor{}
	}
	return Tensor{C.ggml_scale(c.p, a.p, C.float(s))}
}

// MulMat is ggml_mul_mat(a, b): result[i,j] = dot(a row i, b row j), shape
// [a.ne1, b.ne1, b.ne2, b.ne3]; a broadcasts over b's dims 2 and 3 (GQA).
func (c *GGMLContext) MulMat(a, b Tensor) Tensor {
	if !c.ok("mul_mat", a, b) {
		return Tensor{}
	}
	if a.Ne(0) != b.Ne(0) || b.Ne(2)%a.Ne(2) != 0 || b.Ne(3)%a.Ne(3) != 0 {
		return c.fail("mul_mat: %v x %v", shape(a), shape(b))
	}
	if a.Nb(0) > a.Nb(1) && a.Type() != GGMLTypeF32 && a.Type() != GGMLTypeF16 {
		return c.fail("mul_mat: transposed %s operand", a.Type())
	}
	return Tensor{C.ggml_mul_mat(c.p, a.p, b.p)}
}

// SetPrecF32 asks for F32 accumulation in a mul_mat or flash_attn_ext node.
func (c *GGMLContext) SetPrecF32(t Tensor) {
	if t.p == nil {
		return
	}
	switch t.p.op {
	case C.GGML_OP_MUL_MAT:
		C.ggml_mul_mat_set_prec(t.p, C.GGML_PREC_F32)
	case C.GGML_OP_FLASH_ATTN_EXT:
		C.ggml_flash_attn_ext_set_prec(t.p, C.GGML_PREC_F32)
	}
}

// RoPE modes.
const (
	RopeNorm = C.GGML_ROPE_TYPE_NORMAL // LLaMA: rotate adjacent pairs
	RopeNeox = C.GGML_ROPE_TYPE_NEOX
)

// RopeParams are ggml_rope_ext's scalar parameters.
type RopeParams struct {
	NDims      int
	Mode       int
	NCtxOrig   int
	FreqBase   float32
	FreqScale  float32
	ExtFactor  float32
	AttnFactor float32
	BetaFast   float32
	BetaSlow   float32
}

// RopeExt rotates a [head_dim, n_head, n_tokens] by the I32 positions pos
// (len n_tokens); freqFactors (optional, F32 [n_dims/2]) are llama-3's
// per-frequency divisors.
func (c *GGMLContext) RopeExt(a, pos, freqFactors Tensor, p *RopeParams) Tensor {
	if !c.ok("rope_ext", a, pos) {
		return Tensor{}
	}
	if pos.Type() != GGMLTypeI32 || pos.Ne(0) != a.Ne(2) {
		return c.fail("rope_ext: positions %v %s for %v", shape(pos), pos.Type(), shape(a))
	}
	if freqFactors.p != nil && (freqFactors.Type() != GGMLTypeF32 || freqFactors.Ne(0) < int64(p.NDims/2)) {
		return c.fail("rope_ext: frequency factors %v, want f32 [%d]", shape(freqFactors), p.NDims/2)
	}
	return Tensor{C.ggml_rope_ext(c.p, a.p, pos.p, freqFactors.p, C.int(p.NDims), C.int(p.Mode), C.int(p.NCtxOrig),
		C.float(p.FreqBase), C.float(p.FreqScale), C.float(p.ExtFactor), C.float(p.AttnFactor),
		C.float(p.BetaFast), C.float(p.BetaSlow))}
}

// Reshape returns a view of contiguous a with shape ne (1–4 dims).
func (c *GGMLContext) Reshape(a Tensor, ne ...int64) Tensor {
	if !c.ok("reshape", a) {
		return Tensor{}
	}
	n := int64(1)
	for _, x := range ne {
		n *= x
	}
	if n != a.Nelements() || !a.Contiguous() {
		return c.fail("reshape: %v (contiguous %v) to %v", shape(a), a.Contiguous(), slices.Clone(ne)) // a copy: ne stays on the caller's stack
	}
	switch len(ne) {
	case 1:
		return Tensor{C.ggml_reshape_1d(c.p, a.p, C.int64_t(ne[0]))}
	case 2:
		return Tensor{C.ggml_reshape_2d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]))}
	case 3:
		return Tensor{C.ggml_reshape_3d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]))}
	case 4:
		return Tensor{C.ggml_reshape_4d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3]))}
	}
	return c.fail("reshape: %d dims", len(ne))
}

// View returns a strided view of a: shape ne (1–4 dims), byte strides nb for
// dims 1.. (len(nb) = len(ne)-1), starting offset bytes into a's data. The
// view must lie inside a.
func (c *GGMLContext) View(a Tensor, offset int64, ne []int64, nb []int64) Tensor {
	if !c.ok("view", a) {
		return Tensor{}
	}
	if len(ne) < 1 || len(ne) > 4 || len(nb) != len(ne)-1 || offset < 0 {
		return c.fail("view: %d dims, %d strides", len(ne), len(nb))
	}
	// Extent check: the last byte touched must be inside a.
	end := offset + a.Type().RowSize(ne[0])
	for i := 1; i < len(ne); i++ {
		end += (ne[i] - 1) * nb[i-1]
	}
	if !a.Type().RowOK(ne[0]) || end > a.Nbytes() {
		return c.fail("view: %v at offset %d exceeds %v", slices.Clone(ne), offset, shape(a)) // a copy: ne stays on the caller's stack
	}
	o := C.size_t(offset)
	switch len(ne) {
	case 1:
		return Tensor{C.ggml_view_1d(c.p, a.p, C.int64_t(ne[0]), o)}
	case 2:
		return Tensor{C.ggml_view_2d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.size_t(nb[0]), o)}
	case 3:
		return Tensor{C.ggml_view_3d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]),
			C.size_t(nb[0]), C.size_t(nb[1]), o)}
	default:
		return Tensor{C.ggml_view_4d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3]),
			C.size_t(nb[0]), C.size_t(nb[1]), C.size_t(nb[2]), o)}
	}
}

// Permute reorders the axes of a (ggml_permute semantics: axis i goes to position ax[i]).
func (c *GGMLContext) Permute(a Tensor, ax0, ax1, ax2, ax3 int) Tensor {
	if !c.ok("permute", a) {
		return Tensor{}
	}
	seen := [4]bool{}
	for _, x := range [4]int{ax0, ax1, ax2, ax3} {
		if x < 0 || x > 3 || seen[x] {
			return c.fail("permute: bad axes %d %d %d %d", ax0, ax1, ax2, ax3)
		}
		seen[x] = true
	}
	return Tensor{C.ggml_permute(c.p, a.p, C.int(ax0), C.int(ax1), C.int(ax2), C.int(ax3))}
}

// Transpose swaps dims 0 and 1 (a view).
func (c *GGMLContext) Transpose(a Tensor) Tensor {
	if !c.ok("transpose", a) {
		return Tensor{}
	}
	return Tensor{C.ggml_transpose(c.p, a.p)}
}

// Cont makes a contiguous copy of a, optionally reshaped to ne.
func (c *GGMLContext) Cont(a Tensor, ne ...int64) Tensor {
	if !c.ok("cont", a) {
		return Tensor{}
	}
	if len(ne) == 0 {
		return Tensor{C.ggml_cont(c.p, a.p)}
	}
	n := int64(1)
	for _, x := range ne {
		n *= x
	}
	if n != a.Nelements() {
		return c.fail("cont: %v to %v", shape(a), ne)
	}
	switch len(ne) {
	case 2:
		return Tensor{C.ggml_cont_2d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]))}
	case 3:
		return Tensor{C.ggml_cont_3d(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]))}
	}
	return c.fail("cont: %d dims", len(ne))
}

// Cast converts a to typ (F32 from any quantized type dequantizes; F32→Q
// quantizes rows).
func (c *GGMLContext) Cast(a Tensor, typ GGMLType) Tensor {
	if !c.ok("cast", a) {
		return Tensor{}
	}
	if !typ.RowOK(a.Ne(0)) {
		return c.fail("cast: rows of %d to %s", a.Ne(0), typ)
	}
	if a.Type().Quantized() && typ != GGMLTypeF32 {
		return c.fail("cast: %s to %s (quantized sources only to f32)", a.Type(), typ)
	}
	return Tensor{C.ggml_cast(c.p, a.p, C.enum_ggml_type(typ))}
}

// Cpy copies a into b (converting types) and returns a view of b.
func (c *GGMLContext) Cpy(a, b Tensor) Tensor {
	if !c.ok("cpy", a, b) {
		return Tensor{}
	}
	if a.Nelements() != b.Nelements() {
		return c.fail("cpy: %v into %v", shape(a), shape(b))
	}
	return Tensor{C.ggml_cpy(c.p, a.p, b.p)}
}

// SetRows writes the rows of src into dst at the I64 row indices idx and
// returns a view of dst (used to store K and V into the KV arena; quantizes
// when dst is quantized).
func (c *GGMLContext) SetRows(dst, src, idx Tensor) Tensor {
	if !c.ok("set_rows", dst, src, idx) {
		return Tensor{}
	}
	if idx.Type() != GGMLTypeI64 || src.Ne(0) != dst.Ne(0) || idx.Ne(0) != src.Ne(1) {
		return c.fail("set_rows: dst %v src %v idx %v %s", shape(dst), shape(src), shape(idx), idx.Type())
	}
	return Tensor{C.ggml_set_rows(c.p, dst.p, src.p, idx.p)}
}

// SoftMaxExt is softmax(a*scale + mask) over rows; mask (F16 or F32,
// optional) is [n_kv, ≥ n_rows].
func (c *GGMLContext) SoftMaxExt(a, mask Tensor, scale float32) Tensor {
	if !c.ok("soft_max_ext", a) {
		return Tensor{}
	}
	if mask.p != nil && (mask.Ne(0) != a.Ne(0) || mask.Ne(1) < a.Ne(1) || !mask.Contiguous()) {
		return c.fail("soft_max_ext: mask %v for %v", shape(mask), shape(a))
	}
	return Tensor{C.ggml_soft_max_ext(c.p, a.p, mask.p, C.float(scale), 0)}
}

// FlashAttnExt is fused attention. q [hd, n_tokens, n_head], k and v
// [hd, n_kv, n_head_kv] (v not transposed), mask F16 [n_kv, n_tokens].
// Result [hd, n_head, n_tokens] (permuted).
func (c *GGMLContext) FlashAttnExt(q, k, v, mask Tensor, scale float32) Tensor {
	if !c.ok("flash_attn_ext", q, k, v, mask) {
		return Tensor{}
	}
	if k.Ne(0) != q.Ne(0) || q.Ne(2)%k.Ne(2) != 0 || v.Ne(1) != k.Ne(1) || mask.Type() != GGMLTypeF16 ||
		!mask.Contiguous() || mask.Ne(0) != k.Ne(1) || mask.Ne(1) < q.Ne(1) {
		return c.fail("flash_attn_ext: q %v k %v v %v mask %v %s", shape(q), shape(k), shape(v), shape(mask), mask.Type())
	}
	return Tensor{C.ggml_flash_attn_ext(c.p, q.p, k.p, v.p, mask.p, C.float(scale), 0, 0)}
}

// SwiGLUSplit is silu(a) * b (the LLaMA FFN gate).
func (c *GGMLContext) SwiGLUSplit(a, b Tensor) Tensor {
	if !c.ok("swiglu", a, b) {
		return Tensor{}
	}
	if shape(a) != shape(b) {
		return c.fail("swiglu: %v and %v", shape(a), shape(b))
	}
	return Tensor{C.ggml_swiglu_split(c.p, a.p, b.p)}
}

// Silu is x*sigmoid(x).
func (c *GGMLContext) Silu(a Tensor) Tensor {
	if !c.ok("silu", a) {
		return Tensor{}
	}
	return Tensor{C.ggml_silu(c.p, a.p)}
}

// shape is a tensor's ne for error messages.
func shape(t Tensor) [4]int64 {
	if t.p == nil {
		return [4]int64{}
	}
	return [4]int64{t.Ne(0), t.Ne(1), t.Ne(2), t.Ne(3)}
}
