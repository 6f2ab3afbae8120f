// edgellm decode attention (issue #31), written for this project: for each
// query row j and head h (kv head g = h / (n_head / n_head_kv)), over the
// positions c of the cache,
//     s_c = q.k_c * scale (softcap: cap*tanh(q.k_c * scale/cap)) + mask_c,
//     out = sum_c exp(s_c - M) v_c / sum_c exp(s_c - M),  M = max_c s_c,
// ggml_flash_attn_ext's semantics as the native graph calls it, with every
// sum in F32 (ggml's CPU op rounds q to F16 and accumulates V in F16).
// Positions whose mask is -inf are skipped exactly: their K and V are never
// read. Three passes per (kv head, rows): scores of all q vectors of the
// GQA group and rows, chunk by chunk of positions (each K row is loaded
// once from memory for all of them), then max / exp / sum per q vector,
// then the V rows chunk by chunk (again once for all q vectors).
//
// The arithmetic contract (every implementation, n_q, thread split):
//   dot: element i into lane i % 16 by fma, in order, then the fold
//        v[l] = a[l] + a[l+8]; ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7))
//        (matvec_f32.c's); s = dot*scale' then tanhf and + mask as ggml;
//   p_c = attn_exp(s_c - M) (attn_exp below: fma-only, the same bits in
//        scalar and vector code), 0 for masked positions;
//   S:   p_c into lane c % 16 in order, the same fold;
//   acc[d] = fmaf(p_c, v_c[d], acc[d]) in increasing c over p_c != 0;
//   out[d] = acc[d] * (S == 0 ? 0 : 1/S).
// So (j, h) depends only on q row (j, h), mask row j, K and V: bitwise the
// same for any n_q, any other rows, any thread count, and scalar, AVX2 and
// AVX-512 agree bitwise (TestAttnImplsAgree). Contraction is off.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emv_fp16.h"
#include "matvec.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define ATTN_CHUNK 64          // positions per K/V chunk (16 KB of K at hd 128)
#define ATTN_SCRATCH_F 65536   // scores floats per item, soft bound (256 KB)

// ---- the exp of the contract (x <= 0; -inf, NaN and x < -87 give 0) ----

#define ATTN_LOG2E 1.44269504088896341f
#define ATTN_MAGIC 12582912.0f // 1.5 * 2^23: adding it rounds to an integer
#define ATTN_LN2_HI 0.693359375f
#define ATTN_LN2_LO 2.12194440e-4f // ln2 = LN2_HI - LN2_LO
#define ATTN_P0 1.9875691500e-4f
#define ATTN_P1 1.3981999507e-3f
#define ATTN_P2 8.3334519073e-3f
#define ATTN_P3 4.1665795894e-2f
#define ATTN_P4 1.6666665459e-1f
#define ATTN_P5 5.0000001201e-1f

static inline float attn_exp(float x) {
	if (!(x >= -87.0f)) return 0.0f;
	float kf = fmaf(x, ATTN_LOG2E, ATTN_MAGIC);
	int32_t kb, mb;
	float magic = ATTN_MAGIC;
	memcpy(&kb, &kf, 4);
	memcpy(&mb, &magic, 4);
	int32_t n = kb - mb;
	kf = kf - ATTN_MAGIC;
	float r = fmaf(kf, -ATTN_LN2_HI, x);
	r = fmaf(kf, ATTN_LN2_LO, r);
	float p = ATTN_P0;
	p = fmaf(p, r, ATTN_P1);
	p = fmaf(p, r, ATTN_P2);
	p = fmaf(p, r, ATTN_P3);
	p = fmaf(p, r, ATTN_P4);
	p = fmaf(p, r, ATTN_P5);
	float y = fmaf(p, r * r, r) + 1.0f;
	uint32_t sb = (uint32_t)(n + 127) << 23;
	float sc;
	memcpy(&sc, &sb, 4);
	return y * sc;
}

static inline float attn_fold16(const float *a) {
	float v[8];
	for (int l = 0; l < 8; l++) v[l] = a[l] + a[l + 8];
	return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

// s = dot*scale, softcap, + mask: ggml's order (scale is already scale/cap
// when capped).
static inline float attn_post(float dot, float scale, float softcap, float mv) {
	float s = dot * scale;
	if (softcap != 0.0f) s = softcap * tanhf(s);
	return s + mv;
}

// ---- the per-implementation pieces ----
// scores: s[c] for c in [c0, c1) (-inf where masked), returns their max.
// expsum: s[c] -> p[c] for c in [0, n), returns S.
// axpy:   acc += p[c] v_c for c in [c0, c1) with p[c] != 0.
// h2f:    n F16 values to F32.
typedef struct {
	float (*scores)(const float *q, const uint8_t *k, size_t ks, int64_t hd, int64_t c0, int64_t c1,
	                const float *m, float scale, float softcap, float *s);
	float (*expsum)(float *s, int64_t n, float M);
	void (*axpy)(float *acc, const float *p, const uint8_t *v, size_t vs, int64_t hd, int64_t c0, int64_t c1);
	void (*h2f)(const uint8_t *h, int64_t n, float *f);
} attn_ops;

static float attn_dot_scalar(const float *q, const uint8_t *k, int64_t hd) {
	float acc[16] = {0};
	for (int64_t i = 0; i < hd; i++) acc[i % 16] = fmaf(emv_h2f(k + 2 * i), q[i], acc[i % 16]);
	return attn_fold16(acc);
}

static float attn_scores_scalar(const float *q, const uint8_t *k, size_t ks, int64_t hd, int64_t c0, int64_t c1,
                                const float *m, float scale, float softcap, float *s) {
	float mx = -INFINITY;
	for (int64_t c = c0; c < c1; c++) {
		float mv = m ? m[c] : 0.0f;
		if (mv == -INFINITY) {
			s[c] = -INFINITY;
			continue;
		}
		s[c] = attn_post(attn_dot_scalar(q, k + (size_t)c * ks, hd), scale, softcap, mv);
		if (s[c] > mx) mx = s[c];
	}
	return mx;
}

static float attn_expsum_scalar(float *s, int64_t n, float M) {
	float acc[16] = {0};
	for (int64_t c = 0; c < n; c++) {
		s[c] = attn_exp(s[c] - M);
		acc[c % 16] = acc[c % 16] + s[c];
	}
	return attn_fold16(acc);
}

static void attn_axpy_scalar(float *acc, const float *p, const uint8_t *v, size_t vs, int64_t hd, int64_t c0,
                             int64_t c1) {
	for (int64_t c = c0; c < c1; c++) {
		if (p[c] == 0.0f) continue;
		const uint8_t *vr = v + (size_t)c * vs;
		for (int64_t d = 0; d < hd; d++) acc[d] = fmaf(p[c], emv_h2f(vr + 2 * d), acc[d]);
	}
}

static void attn_h2f_scalar(const uint8_t *h, int64_t n, float *f) {
	for (int64_t i = 0; i < n; i++) f[i] = emv_h2f(h + 2 * i);
}

static const attn_ops attn_scalar = {attn_scores_scalar, attn_expsum_scalar, attn_axpy_scalar, attn_h2f_scalar};

#if defined(__x86_64__)
#include "attn_x86.h"
#endif

// ---- the driver ----

static __thread float *attn_buf;
static __thread size_t attn_cap; // floats

static float *attn_scratch(size_t floats) {
	if (floats > attn_cap) {
		free(attn_buf);
		size_t cap = (floats + 1023) & ~(size_t)1023;
		attn_buf = aligned_alloc(64, cap * sizeof(float));
		attn_cap = attn_buf ? cap : 0;
	}
	return attn_buf;
}

static const attn_ops *attn_pick(int impl) {
	if (impl == EMV_BEST) impl = emv_best_impl();
	if (!emv_impl_available(impl)) return NULL;
#if defined(__x86_64__)
	if (impl == EMV_AVX512VNNI) return &attn_avx512;
	if (impl == EMV_AVX2) return &attn_avx2;
#endif
	return &attn_scalar;
}

int emv_attn_usable(void) {
	int b = emv_best_impl();
	return b == EMV_AVX2 || b == EMV_AVX512VNNI;
}

// Rows [j0, j1) of kv head g: the q vectors t = (j-j0)*G + hh, head g*G+hh.
static void attn_item(const emv_attn_args *a, const attn_ops *ops, int64_t g, int64_t j0, int64_t j1, float *buf) {
	const int64_t G = a->n_head / a->n_head_kv, nkv = a->n_kv, hd = a->hd, nr = j1 - j0, nqv = nr * G;
	const int64_t ldm = (nkv + 15) & ~(int64_t)15, ldh = (hd + 15) & ~(int64_t)15;
	float *mf = buf, *sc = mf + (a->mask ? nr * ldm : 0), *acc = sc + nqv * ldm, *MS = acc + nqv * ldh;
	const uint8_t *kg = (const uint8_t *)a->k + (size_t)g * a->k_s2, *vg = (const uint8_t *)a->v + (size_t)g * a->v_s2;
	float scale = a->softcap != 0.0f ? a->scale / a->softcap : a->scale;
	if (a->mask)
		for (int64_t j = j0; j < j1; j++) ops->h2f((const uint8_t *)a->mask + (size_t)j * a->mask_s1, nkv, mf + (j - j0) * ldm);
	for (int64_t t = 0; t < nqv; t++) MS[t] = -INFINITY;
	for (int64_t c0 = 0; c0 < nkv; c0 += ATTN_CHUNK) {
		int64_t c1 = c0 + ATTN_CHUNK < nkv ? c0 + ATTN_CHUNK : nkv;
		for (int64_t t = 0; t < nqv; t++) {
			int64_t j = j0 + t / G, h = g * G + t % G;
			const float *q = (const float *)((const uint8_t *)a->q + (size_t)j * a->q_s1 + (size_t)h * a->q_s2);
			float mx = ops->scores(q, kg, a->k_s1, hd, c0, c1, a->mask ? mf + (j - j0) * ldm : NULL, scale,
			                       a->softcap, sc + t * ldm);
			if (mx > MS[t]) MS[t] = mx;
		}
	}
	for (int64_t t = 0; t < nqv; t++) {
		MS[nqv + t] = ops->expsum(sc + t * ldm, nkv, MS[t]); // M = -inf: all p are 0 (NaN -> 0)
		memset(acc + t * ldh, 0, (size_t)hd * sizeof(float));
	}
	for (int64_t c0 = 0; c0 < nkv; c0 += ATTN_CHUNK) {
		int64_t c1 = c0 + ATTN_CHUNK < nkv ? c0 + ATTN_CHUNK : nkv;
		for (int64_t t = 0; t < nqv; t++) ops->axpy(acc + t * ldh, sc + t * ldm, vg, a->v_s1, hd, c0, c1);
	}
	for (int64_t t = 0; t < nqv; t++) {
		int64_t j = j0 + t / G, h = g * G + t % G;
		float S = MS[nqv + t], sinv = S == 0.0f ? 0.0f : 1.0f / S;
		float *o = a->out + ((size_t)j * a->n_head + h) * hd;
		for (int64_t d = 0; d < hd; d++) o[d] = acc[t * ldh + d] * sinv;
	}
}

int emv_attn(const emv_attn_args *a, int ith, int nth) {
	if (!a || !a->q || !a->k || !a->v || !a->out || a->hd < 1 || a->n_q < 1 || a->n_head_kv < 1 ||
	    a->n_head < a->n_head_kv || a->n_head % a->n_head_kv != 0 || a->n_kv < 1 || nth < 1 || ith < 0 || ith >= nth)
		return -1;
	const attn_ops *ops = attn_pick(a->impl);
	if (!ops) return -1;
	const int64_t G = a->n_head / a->n_head_kv, nkv = a->n_kv, U = a->n_head_kv * a->n_q;
	const int64_t ldm = (nkv + 15) & ~(int64_t)15, ldh = (a->hd + 15) & ~(int64_t)15;
	int64_t rmax = ATTN_SCRATCH_F / (G * ldm);
	if (rmax < 1) rmax = 1;
	if (rmax > a->n_q) rmax = a->n_q;
	int64_t u = U * ith / nth, u1 = U * (ith + 1) / nth;
	if (u >= u1) return 0;
	float *buf = attn_scratch((size_t)(rmax * ldm + rmax * G * (ldm + ldh + 2)));
	if (!buf) return -2;
	while (u < u1) {
		int64_t g = u / a->n_q, j0 = u % a->n_q, j1 = j0 + rmax;
		if (j1 > a->n_q) j1 = a->n_q;
		if (j1 - j0 > u1 - u) j1 = j0 + (u1 - u);
		attn_item(a, ops, g, j0, j1, buf);
		u += j1 - j0;
	}
	return 0;
}
