package kernels

/*
#include <stdlib.h>
#include "ggml.h"
#include "shim.h"

// emv_q4x4_matvec's and emv_matvec's signatures (kernels/matvec); the
// pointers come from matvec.Q4x4CFunc and matvec.CFunc.
typedef int (*edgellm_q4x4_fn)(const void *, int64_t, int64_t, int64_t, int64_t, const void *, size_t, int64_t,
                               float *, size_t);
typedef int (*edgellm_mv_fn2)(int, int, const void *, size_t, int64_t, int64_t, int64_t, const void *, size_t,
                              int64_t, float *, size_t);
// emv_q4x4_matvec_split's.
typedef int (*edgellm_q4x4_split_fn)(const void *, int64_t, int64_t, const void *, size_t, int64_t, float *, size_t,
                                     void *, int, int);

// One matrix's q4x4 copy, in C memory: the op's userdata.
typedef struct {
	edgellm_q4x4_fn q4x4;
	edgellm_q4x4_split_fn split;
	edgellm_mv_fn2 plain;
	const void *packed;
} edgellm_q4x4_t;

static edgellm_q4x4_t *edgellm_q4x4_new(void *q4x4, void *split, void *plain, const void *packed) {
	edgellm_q4x4_t *d = malloc(sizeof *d);
	if (d) {
		d->q4x4 = (edgellm_q4x4_fn)q4x4;
		d->split = (edgellm_q4x4_split_fn)split;
		d->plain = (edgellm_mv_fn2)plain;
		d->packed = packed;
	}
	return d;
}

// One op node's userdata, in the graph's metadata context: the matrix and
// the node's row-sharing state (zeroed; emv_split.h).
typedef struct {
	const edgellm_q4x4_t *d;
	void *split;
} edgellm_q4x4_node_t;

// The op's body: the threads share 16-row units (4 groups of the layout;
// whole 64-byte lines of each output row) through the node's split state,
// each starting on its own contiguous range; where that does not apply
// (n > 8, the AVX2 kernel) thread ith of nth takes a fixed range. The bits
// do not depend on the split. Should the q4x4 kernel decline (-2: no
// AVX-512 VNNI here), the plain-block kernel computes the same bits from
// the mapped blocks.
static void edgellm_q4x4_op(struct ggml_tensor *dst, int ith, int nth, void *ud) {
	const edgellm_q4x4_node_t *nd = ud;
	const edgellm_q4x4_t *d = nd->d;
	const struct ggml_tensor *w = dst->src[0], *a = dst->src[1];
	if (nth > 1 && d->split(d->packed, w->ne[1], w->ne[0], a->data, a->nb[1], a->ne[1], (float *)dst->data,
	                        dst->nb[1] / sizeof(float), nd->split, ith, nth) >= 0)
		return;
	int64_t m = w->ne[1], units = (m + 15) / 16;
	int64_t r0 = 16 * (units * ith / nth), r1 = 16 * (units * (ith + 1) / nth);
	if (r1 > m) r1 = m;
	if (r0 >= r1) return;
	size_t ldy = dst->nb[1] / sizeof(float);
	if (d->q4x4(d->packed, m, w->ne[0], r0, r1, a->data, a->nb[1], a->ne[1], (float *)dst->data, ldy) != 0)
		d->plain((int)w->type, -1, w->data, w->nb[1], w->ne[0], r0, r1, a->data, a->nb[1], a->ne[1],
		         (float *)dst->data, ldy);
}

static struct ggml_tensor *edgellm_mul_mat_q4x4(struct ggml_context *ctx, struct ggml_tensor *w,
                                                struct ggml_tensor *aq, edgellm_q4x4_t *d, size_t split_bytes) {
	edgellm_q4x4_node_t *nd = ggml_new_buffer(ctx, sizeof *nd);
	nd->d = d;
	nd->split = edgellm_split_state(ctx, split_bytes);
	struct ggml_tensor *args[2] = {w, aq};
	return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], aq->ne[1], 1, 1, args, 2, edgellm_q4x4_op,
	                      GGML_N_TASKS_MAX, nd);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/edgellm/edgellm/kernels/matvec"
)

// EdgellmQ4x4 is one plain Q4_0 matrix's copy in edgellm's interleaved
// q4x4 layout (kernels/matvec, matvec_q4x4.h), which MulMatEdgellmQ4x4
// reads instead of the mapped blocks: bitwise the same results, fewer
// instructions per weight byte. The caller owns the copy's memory (an
// anonymous mapping); Free releases the descriptor only.
type EdgellmQ4x4 struct {
	d *C.edgellm_q4x4_t
}

var (
	edgellmQ4x4Fn      = matvec.Q4x4CFunc()
	edgellmQ4x4SplitFn = matvec.Q4x4SplitCFunc()
)

// EdgellmQ4x4Available reports whether this CPU runs the q4x4 kernel; where
// it does not, making copies would cost memory for nothing.
func EdgellmQ4x4Available() bool { return matvec.Q4x4Available() }

// EdgellmQ4x4Size is the size of the q4x4 copy of w (0 when w is not a
// plain 2-D Q4_0 matrix the kernels take).
func EdgellmQ4x4Size(w Tensor) int64 {
	if w.p == nil || w.Type() != GGMLTypeQ4_0 || w.Repacked() || w.Ne(2) != 1 || w.Ne(3) != 1 || !w.Allocated() {
		return 0
	}
	return int64(matvec.Q4x4Size(int(w.Ne(1)), int(w.Ne(0))))
}

// NewEdgellmQ4x4 writes the q4x4 copy of w into dst (EdgellmQ4x4Size(w)
// bytes, 64-byte aligned, memory that outlives the copy and every graph
// using it) and returns its descriptor.
func NewEdgellmQ4x4(w Tensor, dst unsafe.Pointer) (*EdgellmQ4x4, error) {
	if EdgellmQ4x4Size(w) == 0 {
		return nil, fmt.Errorf("edgellm q4x4: %s is not a plain Q4_0 matrix", w.Name())
	}
	if uintptr(dst)%64 != 0 {
		return nil, errors.New("edgellm q4x4: destination not 64-byte aligned")
	}
	rows, k := int(w.Ne(1)), int(w.Ne(0))
	if err := matvec.PackQ4x4Into(dst, w.Data(), int(w.Nb(1)), rows, k, 0, matvec.Q4x4Groups(rows)); err != nil {
		return nil, err
	}
	d := C.edgellm_q4x4_new(edgellmQ4x4Fn, edgellmQ4x4SplitFn, edgellmFn, dst)
	if d == nil {
		return nil, errors.New("edgellm q4x4: out of memory")
	}
	return &EdgellmQ4x4{d: d}, nil
}

// Free releases the descriptor (not the copy's memory). No graph built
// with it may run afterwards.
func (p *EdgellmQ4x4) Free() {
	if p != nil && p.d != nil {
		C.free(unsafe.Pointer(p.d))
		p.d = nil
	}
}

// EdgellmQ4x4Eligible reports whether MulMatEdgellmQ4x4(w, x, copy) runs
// the q4x4 kernel: EdgellmEligible(w, x) for a Q4_0 w, except that x may
// have any number of rows (above EdgellmMaxN, prefill, the tiled kernel
// runs: kernels/matvec/matvec_q4x4_gemm.c).
func EdgellmQ4x4Eligible(w, x Tensor) bool {
	return w.p != nil && x.p != nil && w.Type() == GGMLTypeQ4_0 && !w.Repacked() &&
		w.Ne(2) == 1 && w.Ne(3) == 1 && w.Nb(0) < w.Nb(1) &&
		x.Type() == GGMLTypeF32 && x.Ne(0) == w.Ne(0) && x.Ne(2) == 1 && x.Ne(3) == 1 &&
		x.Ne(1) >= 1 && x.Contiguous()
}

// MulMatEdgellmQ4x4 is MulMatEdgellm(w, x) reading p, the q4x4 copy of w:
// the same nodes (ggml's Q8_0 cast of x, shared as there, then a custom op), the same
// bits, and for every batch size: prefill too runs on the copy, each row
// bitwise the single-row result. When w, x are not EdgellmQ4x4Eligible or
// p is nil it is MulMatEdgellm(w, x).
func (c *GGMLContext) MulMatEdgellmQ4x4(w, x Tensor, p *EdgellmQ4x4) Tensor {
	if p == nil || p.d == nil || !EdgellmQ4x4Eligible(w, x) {
		return c.MulMatEdgellm(w, x)
	}
	if !c.ok("mul_mat_edgellm_q4x4", w, x) || c.FreeBytes() < 3*TensorOverhead() {
		return c.fail("mul_mat_edgellm_q4x4: context full")
	}
	return Tensor{C.edgellm_mul_mat_q4x4(c.p, w.p, c.castQ8x(x), p.d, matvec.SplitBytes)}
}
