package kernels

/*
#include "ggml.h"
*/
import "C"

// Ops the non-llama families need (Gemma's GeGLU and soft-capping, Phi-3's
// fused gate-up SwiGLU); same conventions as ggml_ops.go.

// Tanh is the element-wise hyperbolic tangent.
func (c *GGMLContext) Tanh(a Tensor) Tensor {
	if !c.ok("tanh", a) {
		return Tensor{}
	}
	return Tensor{C.ggml_tanh(c.p, a.p)}
}

// GeGLUSplit is gelu(a) * b (the Gemma FFN gate, tanh-approximated GELU).
func (c *GGMLContext) GeGLUSplit(a, b Tensor) Tensor {
	if !c.ok("geglu", a, b) {
		return Tensor{}
	}
	if shape(a) != shape(b) {
		return c.fail("geglu: %v and %v", shape(a), shape(b))
	}
	return Tensor{C.ggml_geglu_split(c.p, a.p, b.p)}
}

// SwiGLU is silu(x[:n/2]) * x[n/2:] over each row of a (the first half of a
// fused gate-up projection is the gate: Phi-3's ffn_up).
func (c *GGMLContext) SwiGLU(a Tensor) Tensor {
	if !c.ok("swiglu", a) {
		return Tensor{}
	}
	if a.Ne(0)%2 != 0 {
		return c.fail("swiglu: odd row %v", shape(a))
	}
	return Tensor{C.ggml_swiglu(c.p, a.p)}
}

// FlashAttnExtCap is FlashAttnExt with attention-logit soft-capping
// (softcap·tanh(s/softcap) of the scaled scores; 0 = off), Gemma 2's.
func (c *GGMLContext) FlashAttnExtCap(q, k, v, mask Tensor, scale, softcap float32) Tensor {
	if softcap == 0 {
		return c.FlashAttnExt(q, k, v, mask, scale)
	}
	if !c.ok("flash_attn_ext", q, k, v, mask) {
		return Tensor{}
	}
	if k.Ne(0) != q.Ne(0) || q.Ne(2)%k.Ne(2) != 0 || v.Ne(1) != k.Ne(1) || mask.Type() != GGMLTypeF16 ||
		!mask.Contiguous() || mask.Ne(0) != k.Ne(1) || mask.Ne(1) < q.Ne(1) {
		return c.fail("flash_attn_ext: q %v k %v v %v mask %v %s", shape(q), shape(k), shape(v), shape(mask), mask.Type())
	}
	return Tensor{C.ggml_flash_attn_ext(c.p, q.p, k.p, v.p, mask.p, C.float(scale), 0, C.float(softcap))}
}
