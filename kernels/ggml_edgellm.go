package kernels

/*
#include "ggml.h"

// emv_matvec's signature (kernels/matvec/matvec.h); the pointer comes from
// matvec.CFunc and rides in the op's userdata.
typedef int (*edgellm_mv_fn)(int, int, const void *, size_t, int64_t, int64_t, int64_t,
                             const void *, size_t, int64_t, float *, size_t);

// edgellm_mv_op is the custom op's body, run by each of ggml's nth pool
// threads: dst[m, n] = w[k, m] x a[k, n] (a: Q8_0 rows). Thread ith takes a
// contiguous range of weight rows (whole row pairs, the AVX-512 kernel's
// unit); the kernel's bits do not depend on the split.
static void edgellm_mv_op(struct ggml_tensor *dst, int ith, int nth, void *ud) {
	const struct ggml_tensor *w = dst->src[0], *a = dst->src[1];
	int64_t m = w->ne[1], pairs = (m + 1) / 2;
	int64_t r0 = 2 * (pairs * ith / nth), r1 = 2 * (pairs * (ith + 1) / nth);
	if (r1 > m) r1 = m;
	if (r0 >= r1) return;
	((edgellm_mv_fn)ud)((int)w->type, -1, w->data, w->nb[1], w->ne[0], r0, r1,
	                    a->data, a->nb[1], a->ne[1], (float *)dst->data, dst->nb[1] / sizeof(float));
}

// edgellm_mvf_op is the float-weight body: dst[m, n] = w[k, m] x x[k, n]
// with w F32 or F16 and x F32 rows read where they are (no cast node);
// the kernel is emv_matvec_f32 (kernels/matvec/matvec_f32.h), the split
// edgellm_mv_op's.
typedef int (*edgellm_mvf_fn)(int, int, const void *, size_t, int64_t, int64_t, int64_t,
                              const float *, size_t, int64_t, float *, size_t);

static void edgellm_mvf_op(struct ggml_tensor *dst, int ith, int nth, void *ud) {
	const struct ggml_tensor *w = dst->src[0], *x = dst->src[1];
	int64_t m = w->ne[1], pairs = (m + 1) / 2;
	int64_t r0 = 2 * (pairs * ith / nth), r1 = 2 * (pairs * (ith + 1) / nth);
	if (r1 > m) r1 = m;
	if (r0 >= r1) return;
	((edgellm_mvf_fn)ud)((int)w->type, -1, w->data, w->nb[1], w->ne[0], r0, r1,
	                     (const float *)x->data, x->nb[1], x->ne[1], (float *)dst->data, dst->nb[1] / sizeof(float));
}

static struct ggml_tensor *edgellm_mul_mat_edgellm_f(struct ggml_context *ctx, struct ggml_tensor *w,
                                                     struct ggml_tensor *x, void *fn) {
	struct ggml_tensor *args[2] = {w, x};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], 1, 1, args, 2, edgellm_mvf_op,
	                      GGML_N_TASKS_MAX, fn);
}

static struct ggml_tensor *edgellm_mul_mat_edgellm(struct ggml_context *ctx, struct ggml_tensor *w,
                                                   struct ggml_tensor *aq, void *fn) {
	struct ggml_tensor *args[2] = {w, aq};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], aq->ne[1], 1, 1, args, 2, edgellm_mv_op,
	                      GGML_N_TASKS_MAX, fn);
}
*/
import "C"

import "github.com/edgellm/edgellm/kernels/matvec"

// EdgellmMaxN is the largest number of activation rows (tokens) for which
// MulMatEdgellm uses edgellm's kernels: decode steps and speculative
// verify batches, up to K+1 = 9 rows (abi.MaxSpecK 8; the ninth row takes
// a second pass over the weights, matvec.MaxN being 8). Larger batches
// (prefill) stay on ggml's mul_mat, whose blocked kernels are built for
// them.
const EdgellmMaxN = matvec.MaxN + 1

var (
	edgellmFn  = matvec.CFunc()
	edgellmFnF = matvec.CFuncFloat()
)

// OpName is ggml's name for the op that computes t ("MUL_MAT", "CUSTOM",
// ...; "NONE" for a leaf).
func (t Tensor) OpName() string { return C.GoString(C.ggml_op_desc(t.p)) }

// CountOps is how many of g's nodes compute op (an OpName).
func (g *Graph) CountOps(op string) int {
	n := 0
	for i := range g.NNodes() {
		if (Tensor{C.ggml_graph_node(g.p, C.int(i))}).OpName() == op {
			n++
		}
	}
	return n
}

// EdgellmEligible reports whether MulMatEdgellm(w, x) runs edgellm's kernel
// (and not ggml's mul_mat): w is a plain (not repacked) Q8_0, Q4_0, F32 or
// F16 matrix and x a contiguous 2-D F32 batch of 1..EdgellmMaxN rows.
func EdgellmEligible(w, x Tensor) bool {
	return w.p != nil && x.p != nil && EdgellmCovers(w.Type()) && !w.Repacked() &&
		w.Ne(2) == 1 && w.Ne(3) == 1 && w.Nb(0) < w.Nb(1) &&
		x.Type() == GGMLTypeF32 && x.Ne(0) == w.Ne(0) && x.Ne(2) == 1 && x.Ne(3) == 1 &&
		x.Ne(1) >= 1 && x.Ne(1) <= EdgellmMaxN && x.Contiguous()
}

// EdgellmCovers reports whether edgellm's kernels take weights of type t:
// Q8_0 and Q4_0 (Q8_0 activations, as ggml's own), F32 and F16 (F32
// activations).
func EdgellmCovers(t GGMLType) bool {
	return matvec.Supported(int(t)) || matvec.SupportedFloat(int(t))
}

// MulMatEdgellm is MulMat(w, x) computed by edgellm's own matvec kernels
// (kernels/matvec) when EdgellmEligible(w, x), and by ggml's mul_mat
// otherwise. For quantised w, two nodes: x is cast to Q8_0 by ggml (the
// same quantisation its mul_mat applies to the vector operand; the cast of
// one x is made once per context and shared by the matmuls that read it),
// then a custom op; for F32/F16 w, the custom op alone reads x as it is. The op,
// run by the graph's thread pool with the weight rows split across the
// threads, reads each weight block once for all rows of x. Row j of the result is bitwise
// the same whatever the number of rows or threads (matvec's contract).
func (c *GGMLContext) MulMatEdgellm(w, x Tensor) Tensor {
	if !EdgellmEligible(w, x) {
		return c.MulMat(w, x)
	}
	if !c.ok("mul_mat_edgellm", w, x) || c.FreeBytes() < 2*TensorOverhead() {
		return c.fail("mul_mat_edgellm: context full")
	}
	if matvec.SupportedFloat(int(w.Type())) {
		return Tensor{C.edgellm_mul_mat_edgellm_f(c.p, w.p, x.p, edgellmFnF)}
	}
	return Tensor{C.edgellm_mul_mat_edgellm(c.p, w.p, c.castQ8x(x), edgellmFn)}
}

// castQ8x is x cast to Q8_0 (ggml's quantization of a mul_mat operand),
// made once per x: the edgellm matmuls that read one input (q, k and v;
// gate and up) share the cast, one graph node instead of three or two.
// Reset forgets it with the context's tensors.
func (c *GGMLContext) castQ8x(x Tensor) *C.struct_ggml_tensor {
	if c.castSrc != x.p || c.castQ8 == nil {
		c.castSrc, c.castQ8 = x.p, C.ggml_cast(c.p, x.p, C.GGML_TYPE_Q8_0)
	}
	return c.castQ8
}
