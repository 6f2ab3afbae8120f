package matvec

/*
#include "attn.h"

// emv_attn with the operands as arguments (Go memory may be passed to C
// as call arguments, not inside a struct).
static int emv_attn_flat(int impl, const float *q, const uint16_t *k, const uint16_t *v, const uint16_t *mask,
                         int64_t hd, int64_t nq, int64_t nh, int64_t nhkv, int64_t nkv, float scale, float softcap,
                         float *out, int ith, int nth) {
	emv_attn_args a = {0};
	a.q = q; a.k = k; a.v = v; a.mask = mask;
	a.q_s1 = (size_t)(nh * hd) * 4; a.q_s2 = (size_t)hd * 4;
	a.k_s1 = a.v_s1 = (size_t)(nhkv * hd) * 2; a.k_s2 = a.v_s2 = (size_t)hd * 2;
	a.mask_s1 = (size_t)nkv * 2;
	a.hd = hd; a.n_q = nq; a.n_head = nh; a.n_head_kv = nhkv; a.n_kv = nkv;
	a.scale = scale; a.softcap = softcap; a.out = out; a.impl = impl;
	return emv_attn(&a, ith, nth);
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// AttnMaxN is the number of query rows the attention kernel is written
// for (decode and speculative verify batches); it takes more, each row
// computed alone.
const AttnMaxN = 9

// AttnUsable reports whether the vector attention kernel (AVX2+FMA+F16C or
// AVX-512) runs on this CPU; elsewhere (arm64 included) callers keep
// ggml's flash attention.
func AttnUsable() bool { return C.emv_attn_usable() != 0 }

// AttnCFunc is emv_attn as a C function pointer,
// int (*)(const emv_attn_args *, int ith, int nth), for package kernels'
// ggml custom op.
func AttnCFunc() unsafe.Pointer { return C.emv_attn }

// AttnShape is one attention call's shape.
type AttnShape struct {
	HD, NQ, NHead, NHeadKV, NKV int
	Scale, Softcap              float32
}

// Attn runs the attention kernel with impl on threads goroutines. q holds
// NQ*NHead rows of HD (row (j, h) at (j*NHead+h)*HD); k and v hold F16
// bits, NKV*NHeadKV rows (position c, kv head g at (c*NHeadKV+g)*HD, the
// KV cache's layout); mask is nil or NQ rows of NKV F16 values; out gets
// [HD, NHead, NQ]. The bits of out do not depend on threads.
func Attn(impl Impl, s AttnShape, q []float32, k, v, mask []uint16, out []float32, threads int) error {
	nkvRows := s.NKV * s.NHeadKV * s.HD
	switch {
	case !available(impl):
		return fmt.Errorf("%w: %v not available on this CPU", ErrArgs, impl)
	case s.HD < 1 || s.NQ < 1 || s.NHeadKV < 1 || s.NKV < 1 || s.NHead%s.NHeadKV != 0 ||
		len(q) < s.NQ*s.NHead*s.HD || len(k) < nkvRows || len(v) < nkvRows ||
		(mask != nil && len(mask) < s.NQ*s.NKV) || len(out) < s.NQ*s.NHead*s.HD:
		return fmt.Errorf("%w: attention %+v", ErrArgs, s)
	}
	var mp *C.uint16_t
	if mask != nil {
		mp = (*C.uint16_t)(unsafe.Pointer(&mask[0]))
	}
	threads = max(threads, 1)
	errs := make([]C.int, threads)
	var wg sync.WaitGroup
	for ith := 0; ith < threads; ith++ {
		wg.Add(1)
		go func(ith int) {
			defer wg.Done()
			errs[ith] = C.emv_attn_flat(C.int(impl), (*C.float)(&q[0]), (*C.uint16_t)(&k[0]), (*C.uint16_t)(&v[0]), mp,
				C.int64_t(s.HD), C.int64_t(s.NQ), C.int64_t(s.NHead), C.int64_t(s.NHeadKV), C.int64_t(s.NKV),
				C.float(s.Scale), C.float(s.Softcap), (*C.float)(&out[0]), C.int(ith), C.int(threads))
		}(ith)
	}
	wg.Wait()
	for _, e := range errs {
		if e != 0 {
			return fmt.Errorf("%w: emv_attn returned %d", ErrArgs, int(e))
		}
	}
	return nil
}
