// attn.h: edgellm's decode attention kernel (issue #31): n_q = 1..9 query
// rows over F16 K and V, the semantics of ggml_flash_attn_ext as the native
// graph calls it (no ALiBi, no sinks), accumulated in F32. See attn.c for
// the arithmetic contract.
#ifndef EDGELLM_ATTN_H
#define EDGELLM_ATTN_H
#include <stddef.h>
#include <stdint.h>

// One call's operands. Strides are in bytes; elements within a row are
// contiguous. q row (query j, head h) is q + j*q_s1 + h*q_s2 (F32); K row
// (position c, kv head g) is k + c*k_s1 + g*k_s2 (F16), V likewise; mask
// row j is mask + j*mask_s1 (F16, n_kv entries; NULL: no mask). out is
// F32 [hd, n_head, n_q], contiguous: out + (j*n_head + h)*hd.
typedef struct {
	const void *q, *k, *v, *mask;
	size_t q_s1, q_s2, k_s1, k_s2, v_s1, v_s2, mask_s1;
	int64_t hd, n_q, n_head, n_head_kv, n_kv;
	float scale, softcap;
	float *out;
	int impl; // matvec.h's EMV_*: EMV_BEST, EMV_SCALAR, EMV_AVX2, EMV_AVX512VNNI (runs AVX-512F)
} emv_attn_args;

// emv_attn computes thread ith of nth's share of the output (nth threads
// calling it with the same args and ith = 0..nth-1 compute all of it; the
// bits do not depend on nth). Returns 0, or -1 on bad arguments or an
// implementation this CPU does not run, -2 when scratch memory is out.
int emv_attn(const emv_attn_args *a, int ith, int nth);

// emv_attn_usable reports whether the vector kernel (AVX2+FMA+F16C or
// AVX-512) runs on this CPU.
int emv_attn_usable(void);
#endif
