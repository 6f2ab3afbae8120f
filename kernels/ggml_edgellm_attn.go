package kernels

/*
#include <stdint.h>
#include <string.h>
#include "ggml.h"
#include "matvec/attn.h"

typedef int (*edgellm_attn_fn)(const emv_attn_args *, int, int);

// The op's userdata, in the graph's metadata context.
typedef struct {
	edgellm_attn_fn fn;
	float scale, softcap;
} edgellm_attn_t;

// The op's body: dst [hd, n_head, n_q] = attention of q [hd, n_q, n_head]
// over k, v [hd, n_kv, n_head_kv] (F16 views) under mask [n_kv, >= n_q]
// (F16). Thread ith of nth takes its share of the (kv head, row) units
// (emv_attn); the bits do not depend on the split.
static void edgellm_attn_op(struct ggml_tensor *dst, int ith, int nth, void *ud) {
	const edgellm_attn_t *d = ud;
	const struct ggml_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *m = dst->src[3];
	emv_attn_args a = {0};
	a.q = q->data;
	a.k = k->data;
	a.v = v->data;
	a.mask = m->data;
	a.q_s1 = q->nb[1];
	a.q_s2 = q->nb[2];
	a.k_s1 = k->nb[1];
	a.k_s2 = k->nb[2];
	a.v_s1 = v->nb[1];
	a.v_s2 = v->nb[2];
	a.mask_s1 = m->nb[1];
	a.hd = q->ne[0];
	a.n_q = q->ne[1];
	a.n_head = q->ne[2];
	a.n_head_kv = k->ne[2];
	a.n_kv = k->ne[1];
	a.scale = d->scale;
	a.softcap = d->softcap;
	a.out = (float *)dst->data;
	a.impl = -1;
	d->fn(&a, ith, nth);
}

static struct ggml_tensor *edgellm_attn(struct ggml_context *ctx, struct ggml_tensor *q, struct ggml_tensor *k,
                                        struct ggml_tensor *v, struct ggml_tensor *mask, void *fn, float scale,
                                        float softcap) {
	edgellm_attn_t *d = ggml_new_buffer(ctx, sizeof *d);
	d->fn = (edgellm_attn_fn)fn;
	d->scale = scale;
	d->softcap = softcap;
	struct ggml_tensor *args[4] = {q, k, v, mask};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, q->ne[0], q->ne[2], q->ne[1], 1, args, 4, edgellm_attn_op,
	                      GGML_N_TASKS_MAX, d);
}

// edgellm_is_attn reports whether t is edgellm_attn's node: a custom op
// whose op_params begin with edgellm_attn_op (ggml's ggml_custom_op_params
// holds the function first).
static int edgellm_is_attn(const struct ggml_tensor *t) {
	if (t->op != GGML_OP_CUSTOM) return 0;
	ggml_custom_op_t fn;
	memcpy(&fn, t->op_params, sizeof fn);
	return fn == edgellm_attn_op;
}
*/
import "C"

import "github.com/edgellm/edgellm/kernels/matvec"

var edgellmAttnFn = matvec.AttnCFunc()

// AttnEdgellmEligible reports whether AttnEdgellm(q, k, v, mask, ...) runs
// edgellm's attention kernel (kernels/matvec/attn.c): a CPU with it
// (AVX2+FMA+F16C or AVX-512; not arm64), q F32 [hd, n_q, n_head] (any
// n_q: written for decode and verify batches of up to EdgellmMaxN rows,
// it takes prefill too, so that prefill rows stay bitwise the single
// steps' as with ggml's per-row flash attention), k and v F16 [hd, n_kv, n_head_kv] views with
// contiguous rows (the KV cache's, as the native graph's cacheView makes
// them), n_head a multiple of n_head_kv, mask F16 [n_kv, >= n_q].
func AttnEdgellmEligible(q, k, v, mask Tensor) bool {
	if q.p == nil || k.p == nil || v.p == nil || mask.p == nil || !matvec.AttnUsable() {
		return false
	}
	f16 := func(t Tensor) bool {
		return t.Type() == GGMLTypeF16 && t.Nb(0) == 2 && t.Ne(0) == q.Ne(0) && t.Ne(1) == k.Ne(1) &&
			t.Ne(2) == k.Ne(2) && t.Ne(3) == 1
	}
	return q.Type() == GGMLTypeF32 && q.Nb(0) == 4 && q.Ne(3) == 1 && q.Ne(1) >= 1 &&
		f16(k) && f16(v) && k.Ne(2) >= 1 && q.Ne(2)%k.Ne(2) == 0 &&
		mask.Type() == GGMLTypeF16 && mask.Contiguous() && mask.Ne(0) == k.Ne(1) && mask.Ne(1) >= q.Ne(1) &&
		mask.Ne(2) == 1 && mask.Ne(3) == 1
}

// AttnEdgellm is FlashAttnExtCap(q, k, v, mask, scale, softcap) computed by
// edgellm's attention kernel as a ggml custom op, when the operands are
// AttnEdgellmEligible; otherwise exactly FlashAttnExtCap. The result has
// ggml's shape, [hd, n_head, n_q] F32. Every sum is F32 (ggml's CPU op
// accumulates V in F16) in a fixed order per (row, head): row j is
// bitwise the same whatever the other rows and the thread count
// (kernels/matvec/attn.c).
func (c *GGMLContext) AttnEdgellm(q, k, v, mask Tensor, scale, softcap float32) Tensor {
	if !AttnEdgellmEligible(q, k, v, mask) {
		return c.FlashAttnExtCap(q, k, v, mask, scale, softcap)
	}
	if !c.ok("attn_edgellm", q, k, v, mask) || c.FreeBytes() < 2*TensorOverhead() {
		return c.fail("attn_edgellm: context full")
	}
	return Tensor{C.edgellm_attn(c.p, q.p, k.p, v.p, mask.p, edgellmAttnFn, C.float(scale), C.float(softcap))}
}

// CountAttnEdgellm is how many of g's nodes are AttnEdgellm's custom op.
func (g *Graph) CountAttnEdgellm() int {
	n := 0
	for i := range g.NNodes() {
		if C.edgellm_is_attn(C.ggml_graph_node(g.p, C.int(i))) != 0 {
			n++
		}
	}
	return n
}
