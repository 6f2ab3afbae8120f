package kernels

/*
#include "ggml.h"
#include "shim.h"

// emv_matvec's signature (kernels/matvec/matvec.h); the pointer comes from
// matvec.CFunc.
typedef int (*edgellm_mv_fn)(int, int, const void *, size_t, int64_t, int64_t, int64_t,
                             const void *, size_t, int64_t, float *, size_t);
// emv_matvec_split's (matvec.SplitCFunc).
typedef int (*edgellm_mv_split_fn)(int, int, const void *, size_t, int64_t, int64_t, const void *, size_t, int64_t,
                                   float *, size_t, void *, int, int);
// emv_matvec_f32's and emv_matvec_f32_split's (matvec_f32.h; matvec.CFuncFloat,
// matvec.FloatSplitCFunc).
typedef int (*edgellm_mvf_fn)(int, int, const void *, size_t, int64_t, int64_t, int64_t,
                              const float *, size_t, int64_t, float *, size_t);
typedef int (*edgellm_mvf_split_fn)(int, int, const void *, size_t, int64_t, int64_t, const float *, size_t,
                                    int64_t, float *, size_t, void *, int, int);

// One op node's userdata, in the graph's metadata context: the kernel's
// static and shared-split entries and the node's row-sharing state
// (zeroed, its own cache lines; kernels/matvec/emv_split.h). Per node, not
// per matrix: two sessions may run one matrix at once.
typedef struct {
	void *fn, *split_fn, *split;
} edgellm_mv_node_t;

// edgellm_mv_static is thread ith of nth's fixed range of m rows: whole
// row pairs; 0 when it has none.
static int edgellm_mv_static(int64_t m, int ith, int nth, int64_t *r0, int64_t *r1) {
	int64_t pairs = (m + 1) / 2;
	*r0 = 2 * (pairs * ith / nth), *r1 = 2 * (pairs * (ith + 1) / nth);
	if (*r1 > m) *r1 = m;
	return *r0 < *r1;
}

// edgellm_mv_op is the custom op's body, run by each of ggml's nth pool
// threads: dst[m, n] = w[k, m] x a[k, n] (a: Q8_0 rows). The threads share
// the weight rows through the node's split state (emv_matvec_split: each
// starts on its own contiguous range and takes a slower thread's tail);
// where that does not apply (one thread, the NEON kernel) thread
// ith takes a fixed range of whole row pairs. The kernel's bits do not
// depend on the split.
static void edgellm_mv_op(struct ggml_tensor *dst, int ith, int nth, void *ud) {
	const edgellm_mv_node_t *nd = ud;
	const struct ggml_tensor *w = dst->src[0], *a = dst->src[1];
	size_t ldy = dst->nb[1] / sizeof(float);
	int64_t r0, r1;
	if (nth > 1 && ((edgellm_mv_split_fn)nd->split_fn)((int)w->type, -1, w->data, w->nb[1], w->ne[1], w->ne[0],
	                                                   a->data, a->nb[1], a->ne[1], (float *)dst->data, ldy,
	                                                   nd->split, ith, nth) >= 0)
		return;
	if (!edgellm_mv_static(w->ne[1], ith, nth, &r0, &r1)) return;
	((edgellm_mv_fn)nd->fn)((int)w->type, -1, w->data, w->nb[1], w->ne[0], r0, r1,
	                        a->data, a->nb[1], a->ne[1], (float *)dst->data, ldy);
}

// edgellm_mvf_op is the float-weight body: dst[m, n] = w[k, m] x x[k, n]
// with w F32 or F16 and x F32 rows read where they are (no cast node);
// the kernel is emv_matvec_f32 (kernels/matvec/matvec_f32.h), the split
// edgellm_mv_op's (shared; fixed ranges for one thread).
static void edgellm_mvf_op(struct ggml_tensor *dst, int ith, int nth, void *ud) {
	const edgellm_mv_node_t *nd = ud;
	const struct ggml_tensor *w = dst->src[0], *x = dst->src[1];
	size_t ldy = dst->nb[1] / sizeof(float);
	int64_t r0, r1;
	if (nth > 1 && ((edgellm_mvf_split_fn)nd->split_fn)((int)w->type, -1, w->data, w->nb[1], w->ne[1], w->ne[0],
	                                                    (const float *)x->data, x->nb[1], x->ne[1],
	                                                    (float *)dst->data, ldy, nd->split, ith, nth) >= 0)
		return;
	if (!edgellm_mv_static(w->ne[1], ith, nth, &r0, &r1)) return;
	((edgellm_mvf_fn)nd->fn)((int)w->type, -1, w->data, w->nb[1], w->ne[0], r0, r1,
	                         (const float *)x->data, x->nb[1], x->ne[1], (float *)dst->data, ldy);
}

static edgellm_mv_node_t *edgellm_mv_node(struct ggml_context *ctx, void *fn, void *split_fn, size_t split_bytes) {
	edgellm_mv_node_t *nd = ggml_new_buffer(ctx, sizeof *nd);
	nd->fn = fn, nd->split_fn = split_fn;
	nd->split = edgellm_split_state(ctx, split_bytes);
	return nd;
}

static struct ggml_tensor *edgellm_mul_mat_edgellm_f(struct ggml_context *ctx, struct ggml_tensor *w,
                                                     struct ggml_tensor *x, void *fn, void *split_fn,
                                                     size_t split_bytes) {
	struct ggml_tensor *args[2] = {w, x};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], 1, 1, args, 2, edgellm_mvf_op,
	                      GGML_N_TASKS_MAX, edgellm_mv_node(ctx, fn, split_fn, split_bytes));
}

static struct ggml_tensor *edgellm_mul_mat_edgellm(struct ggml_context *ctx, struct ggml_tensor *w,
                                                   struct ggml_tensor *aq, void *fn, void *split_fn,
                                                   size_t split_bytes) {
	struct ggml_tensor *args[2] = {w, aq};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], aq->ne[1], 1, 1, args, 2, edgellm_mv_op,
	                      GGML_N_TASKS_MAX, edgellm_mv_node(ctx, fn, split_fn, split_bytes));
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
	edgellmFn       = matvec.CFunc()
	edgellmFnF      = matvec.CFuncFloat()
	edgellmSplitFn  = matvec.SplitCFunc()
	edgellmSplitFnF = matvec.FloatSplitCFunc()
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
// run by the graph's thread pool with the weight rows shared between the
// threads (a per-node state in the context's memory: a slower thread's
// tail is taken by the others), reads each weight block once for all rows of x. Row j of the result is bitwise
// the same whatever the number of rows or threads (matvec's contract).
func (c *GGMLContext) MulMatEdgellm(w, x Tensor) Tensor {
	if !EdgellmEligible(w, x) {
		return c.MulMat(w, x)
	}
	// The cast, the op and the op's node state (less than a tensor's
	// overhead).
	if !c.ok("mul_mat_edgellm", w, x) || c.FreeBytes() < 3*TensorOverhead() {
		return c.fail("mul_mat_edgellm: context full")
	}
	if matvec.SupportedFloat(int(w.Type())) {
		return Tensor{C.edgellm_mul_mat_edgellm_f(c.p, w.p, x.p, edgellmFnF, edgellmSplitFnF, matvec.SplitBytes)}
	}
	return Tensor{C.edgellm_mul_mat_edgellm(c.p, w.p, c.castQ8x(x), edgellmFn, edgellmSplitFn, matvec.SplitBytes)}
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
