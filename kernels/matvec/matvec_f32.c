// edgellm F32/F16-weight matvec kernels (issue #31 point 2), written for
// this project. Weights are F32 or F16 rows (ggml's layout: row-major,
// IEEE half for F16), activations F32 rows (ggml's src1 of a mul_mat; no
// conversion of the activations, unlike ggml's F16 mul_mat).
//
// The arithmetic contract (every implementation, every n, every row split):
// for weight row r and activation row j, element i in increasing order,
//     acc[i % 16] = fmaf(w[i], x[i], acc[i % 16])     (F16 w widened exactly)
// starting from +0, then v[l] = acc[l] + acc[l+8] (l = 0..7) and
//     y = ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)).
// Sixteen lanes are one zmm or two ymm; the tree is matvec.c's emv_hsum8 on
// the folded lanes. y for (r, j) depends only on weight row r, activation
// row j and k, so row j of an n-row call is bitwise the 1-row call
// (batch invariance), any split of the rows across threads gives the same
// bits, and scalar, AVX2 and AVX-512 agree bitwise. A k that is not a
// multiple of 16 ends with a masked chunk whose absent lanes are left
// untouched (the scalar loop never reaches them).
// Every fma is explicit; contraction is off so the compiler adds none.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "matvec_f32.h"

#include <math.h>
#include <string.h>

#include "matvec.h"
#include "emv_fp16.h"
#include "emv_prefetch.h"
#include "emv_split.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// ---- scalar reference (also the path off x86) ----

static inline float emvf_w(int t, const uint8_t *wr, int64_t i) {
	if (t == EMV_F16) return emv_h2f(wr + 2 * i);
	float f;
	memcpy(&f, wr + 4 * i, 4);
	return f;
}

static inline float emvf_fold16(const float *a) {
	float v[8];
	for (int l = 0; l < 8; l++) v[l] = a[l] + a[l + 8];
	return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

static void emvf_scalar(int t, const uint8_t *w, size_t ws, int64_t k, int64_t r0, int64_t r1, const uint8_t *x,
                        size_t xs, int n, float *y, size_t ldy) {
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *wr = w + (size_t)r * ws;
		for (int j = 0; j < n; j++) {
			const float *xj = (const float *)(x + (size_t)j * xs);
			float acc[EMVF_LANES] = {0};
			for (int64_t i = 0; i < k; i++) acc[i % EMVF_LANES] = fmaf(emvf_w(t, wr, i), xj[i], acc[i % EMVF_LANES]);
			y[(size_t)j * ldy + r] = emvf_fold16(acc);
		}
	}
}

typedef void (*emvf_fn)(int, const uint8_t *, size_t, int64_t, int64_t, int64_t, int64_t, const uint8_t *, size_t,
                        float *, size_t);

#if defined(__x86_64__)

#define EMVF_T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define EMVF_T_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define EMVF_INLINE static inline __attribute__((always_inline))

// matvec.c's tree on eight lanes: ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)).
EMVF_T_AVX2 EMVF_INLINE float emvf_hsum256(__m256 v8) {
	__m128 v = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
	v = _mm_add_ps(v, _mm_movehl_ps(v, v));
	v = _mm_add_ss(v, _mm_movehdup_ps(v));
	return _mm_cvtss_f32(v);
}

// ---- AVX2: lanes 0..7 in lo, 8..15 in hi ----

// Eight weights from element i of a row (F16 widened exactly by vcvtph2ps).
EMVF_T_AVX2 EMVF_INLINE __m256 emvf_w8(int t, const uint8_t *wr, int64_t i) {
	if (t == EMV_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wr + 2 * i)));
	return _mm256_loadu_ps((const float *)(wr + 4 * i));
}

// R weight rows x n activation rows, rows r .. r+R-1.
// While rows r .. r+R-1 compute, the next R (up to row rpf-1) are prefetched.
EMVF_T_AVX2 EMVF_INLINE void emvf_avx2_rows(int t, const uint8_t *w, size_t ws, int64_t k, int64_t r, int R,
                                            int64_t rpf, const uint8_t *x, size_t xs, int n, float *y, size_t ldy) {
	emv_pf pf = emv_pf_rows(w, ws, (size_t)k * (t == EMV_F16 ? 2 : 4), r, R, rpf, (int)(k / 16 > 0 ? k / 16 : 1));
	__m256 lo[2][EMV_MAXN], hi[2][EMV_MAXN];
	for (int q = 0; q < R; q++)
		for (int j = 0; j < n; j++) lo[q][j] = hi[q][j] = _mm256_setzero_ps();
	int64_t i = 0;
	for (; i + 16 <= k; i += 16) {
		__m256 wl[2], wh[2];
		emv_pf_step(&pf, (int)(i / 16));
		for (int q = 0; q < R; q++) {
			wl[q] = emvf_w8(t, w + (size_t)(r + q) * ws, i);
			wh[q] = emvf_w8(t, w + (size_t)(r + q) * ws, i + 8);
		}
		for (int j = 0; j < n; j++) {
			const float *xj = (const float *)(x + (size_t)j * xs) + i;
			__m256 xl = _mm256_loadu_ps(xj), xh = _mm256_loadu_ps(xj + 8);
			for (int q = 0; q < R; q++) {
				lo[q][j] = _mm256_fmadd_ps(wl[q], xl, lo[q][j]);
				hi[q][j] = _mm256_fmadd_ps(wh[q], xh, hi[q][j]);
			}
		}
	}
	if (i < k) { // the masked last chunk: copies padded with zeros, absent lanes kept by a blend
		int rem = (int)(k - i);
		int32_t mk[16];
		for (int l = 0; l < 16; l++) mk[l] = l < rem ? -1 : 0;
		__m256 ml = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)mk));
		__m256 mh = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(mk + 8)));
		for (int q = 0; q < R; q++) {
			uint8_t wb[64] = {0};
			memcpy(wb, w + (size_t)(r + q) * ws + (size_t)i * (t == EMV_F16 ? 2 : 4), (size_t)rem * (t == EMV_F16 ? 2 : 4));
			__m256 wl = emvf_w8(t, wb, 0), wh = emvf_w8(t, wb, 8);
			for (int j = 0; j < n; j++) {
				float xb[16] = {0};
				memcpy(xb, (const float *)(x + (size_t)j * xs) + i, (size_t)rem * 4);
				lo[q][j] = _mm256_blendv_ps(lo[q][j], _mm256_fmadd_ps(wl, _mm256_loadu_ps(xb), lo[q][j]), ml);
				hi[q][j] = _mm256_blendv_ps(hi[q][j], _mm256_fmadd_ps(wh, _mm256_loadu_ps(xb + 8), hi[q][j]), mh);
			}
		}
	}
	for (int q = 0; q < R; q++)
		for (int j = 0; j < n; j++) y[(size_t)j * ldy + r + q] = emvf_hsum256(_mm256_add_ps(lo[q][j], hi[q][j]));
}

// Rows [r0, r1), prefetching up to row rpf-1 (rpf >= r1; emv_matvec_f32_split).
EMVF_T_AVX2 EMVF_INLINE void emvf_avx2_n(int t, const uint8_t *w, size_t ws, int64_t k, int64_t r0, int64_t r1,
                                         int64_t rpf, const uint8_t *x, size_t xs, int n, float *y, size_t ldy) {
	int64_t r = r0;
	if (n <= 2)
		for (; r + 1 < r1; r += 2) emvf_avx2_rows(t, w, ws, k, r, 2, rpf, x, xs, n, y, ldy);
	for (; r < r1; r++) emvf_avx2_rows(t, w, ws, k, r, 1, rpf, x, xs, n, y, ldy);
}

// ---- AVX-512: lanes 0..15 in one zmm ----

EMVF_T_AVX512 EMVF_INLINE __m512 emvf_w16(int t, const uint8_t *wr, int64_t i) {
	if (t == EMV_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wr + 2 * i)));
	return _mm512_loadu_ps((const float *)(wr + 4 * i));
}

EMVF_T_AVX512 EMVF_INLINE __m512 emvf_w16_mask(int t, const uint8_t *wr, int64_t i, __mmask16 m) {
	if (t == EMV_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, wr + 2 * i));
	return _mm512_maskz_loadu_ps(m, wr + 4 * i);
}

EMVF_T_AVX512 EMVF_INLINE void emvf_avx512_rows(int t, const uint8_t *w, size_t ws, int64_t k, int64_t r, int R,
                                                int64_t rpf, const uint8_t *x, size_t xs, int n, float *y,
                                                size_t ldy) {
	// F32 at n = 1 streams 4 rows of 4k bytes each fast enough for the
	// hardware prefetchers alone (software prefetch measured 0.89-0.93x
	// there: RATIONALE "Software prefetch"); every other case prefetches.
	emv_pf pf = emv_pf_rows(w, ws, (size_t)k * (t == EMV_F16 ? 2 : 4), r, R, t == EMV_F32 && n == 1 ? r + R : rpf,
	                        (int)(k / 16 > 0 ? k / 16 : 1));
	__m512 acc[4][EMV_MAXN];
	for (int q = 0; q < R; q++)
		for (int j = 0; j < n; j++) acc[q][j] = _mm512_setzero_ps();
	int64_t i = 0;
	for (; i + 16 <= k; i += 16) {
		__m512 wv[4];
		emv_pf_step(&pf, (int)(i / 16));
		for (int q = 0; q < R; q++) wv[q] = emvf_w16(t, w + (size_t)(r + q) * ws, i);
		for (int j = 0; j < n; j++) {
			__m512 xv = _mm512_loadu_ps((const float *)(x + (size_t)j * xs) + i);
			for (int q = 0; q < R; q++) acc[q][j] = _mm512_fmadd_ps(wv[q], xv, acc[q][j]);
		}
	}
	if (i < k) { // masked last chunk: mask3_fmadd leaves the absent lanes as they are
		__mmask16 m = (__mmask16)((1u << (k - i)) - 1);
		__m512 wv[4];
		for (int q = 0; q < R; q++) wv[q] = emvf_w16_mask(t, w + (size_t)(r + q) * ws, i, m);
		for (int j = 0; j < n; j++) {
			__m512 xv = _mm512_maskz_loadu_ps(m, (const float *)(x + (size_t)j * xs) + i);
			for (int q = 0; q < R; q++) acc[q][j] = _mm512_mask3_fmadd_ps(wv[q], xv, acc[q][j], m);
		}
	}
	for (int q = 0; q < R; q++)
		for (int j = 0; j < n; j++)
			y[(size_t)j * ldy + r + q] =
			    emvf_hsum256(_mm256_add_ps(_mm512_castps512_ps256(acc[q][j]), _mm512_extractf32x8_ps(acc[q][j], 1)));
}

// Four rows at a time for n <= 4 (independent fma chains at n = 1, one
// activation load for four rows), two beyond (registers).
EMVF_T_AVX512 EMVF_INLINE void emvf_avx512_n(int t, const uint8_t *w, size_t ws, int64_t k, int64_t r0, int64_t r1,
                                             int64_t rpf, const uint8_t *x, size_t xs, int n, float *y, size_t ldy) {
	int64_t r = r0;
	if (n <= 4)
		for (; r + 3 < r1; r += 4) emvf_avx512_rows(t, w, ws, k, r, 4, rpf, x, xs, n, y, ldy);
	for (; r + 1 < r1; r += 2) emvf_avx512_rows(t, w, ws, k, r, 2, rpf, x, xs, n, y, ldy);
	if (r < r1) emvf_avx512_rows(t, w, ws, k, r, 1, rpf, x, xs, n, y, ldy);
}

// One function per (implementation, n): the accumulators stay in registers
// and the j loop unrolls; the type stays a run-time argument (two cases).
#define EMVF_FN(ISA, N)                                                                                    \
	EMVF_T_##ISA static void emvf_##ISA##_##N(int t, const uint8_t *w, size_t ws, int64_t k, int64_t r0,  \
	                                          int64_t r1, int64_t rpf, const uint8_t *x, size_t xs,     \
	                                          float *y, size_t ldy) {                                    \
		if (t == EMV_F16)                                                                              \
			emvf_##ISA##_body(EMV_F16, w, ws, k, r0, r1, rpf, x, xs, N, y, ldy);                   \
		else                                                                                           \
			emvf_##ISA##_body(EMV_F32, w, ws, k, r0, r1, rpf, x, xs, N, y, ldy);                   \
	}
#define emvf_AVX2_body emvf_avx2_n
#define emvf_AVX512_body emvf_avx512_n
#define EMVF_EACH_N(ISA)                                                                                   \
	EMVF_FN(ISA, 1) EMVF_FN(ISA, 2) EMVF_FN(ISA, 3) EMVF_FN(ISA, 4) EMVF_FN(ISA, 5) EMVF_FN(ISA, 6)    \
	EMVF_FN(ISA, 7) EMVF_FN(ISA, 8)
#define EMVF_TAB(ISA)                                                                                      \
	{ emvf_##ISA##_1, emvf_##ISA##_2, emvf_##ISA##_3, emvf_##ISA##_4,                                     \
	  emvf_##ISA##_5, emvf_##ISA##_6, emvf_##ISA##_7, emvf_##ISA##_8 }
EMVF_EACH_N(AVX2)
EMVF_EACH_N(AVX512)
static const emvf_fn emvf_avx2[EMV_MAXN] = EMVF_TAB(AVX2);
static const emvf_fn emvf_avx512[EMV_MAXN] = EMVF_TAB(AVX512);
#endif

// emvf_rows runs impl's kernel on weight rows [r0, r1) for nn <= 8
// activation rows, prefetching up to row rpf-1.
static void emvf_rows(int t, int impl, const uint8_t *wp, size_t ws, int64_t k, int64_t r0, int64_t r1, int64_t rpf,
                      const uint8_t *xj, size_t xs, int nn, float *yj, size_t ldy) {
#if defined(__x86_64__)
	if (impl == EMV_AVX512VNNI) {
		emvf_avx512[nn - 1](t, wp, ws, k, r0, r1, rpf, xj, xs, yj, ldy);
		return;
	}
	if (impl == EMV_AVX2) {
		emvf_avx2[nn - 1](t, wp, ws, k, r0, r1, rpf, xj, xs, yj, ldy);
		return;
	}
#endif
	(void)rpf;
	emvf_scalar(t, wp, ws, k, r0, r1, xj, xs, nn, yj, ldy);
}

int emv_matvec_f32(int t, int impl, const void *w, size_t ws, int64_t k, int64_t r0, int64_t r1, const float *x,
                   size_t xs, int64_t n, float *y, size_t ldy) {
	if ((t != EMV_F32 && t != EMV_F16) || k <= 0 || n < 1 || r0 < 0 || r1 < r0) return -1;
	if (impl == EMV_BEST) impl = emv_best_impl();
	if (!emv_impl_available(impl)) return -1;
	const uint8_t *wp = (const uint8_t *)w, *xp = (const uint8_t *)x;
	for (int64_t j0 = 0; j0 < n; j0 += EMV_MAXN) {
		int nn = (int)(n - j0 < EMV_MAXN ? n - j0 : EMV_MAXN);
		emvf_rows(t, impl, wp, ws, k, r0, r1, r1, xp + (size_t)j0 * xs, xs, nn, y + (size_t)j0 * ldy, ldy);
	}
	return 0;
}

// Rows per pass of impl's float kernel at n activation rows: the unit the
// threads share, so every chunk is whole passes (emvf_avx512_n: 4 rows to
// n = 4, then 2; emvf_avx2_n: 2 rows to n = 2, then 1).
static int64_t emvf_pass_rows(int impl, int64_t n) {
#if defined(__x86_64__)
	if (impl == EMV_AVX512VNNI) return n <= 4 ? 4 : 2;
	if (impl == EMV_AVX2) return n <= 2 ? 2 : 1;
#endif
	(void)impl, (void)n;
	return 1;
}

int emv_matvec_f32_split(int t, int impl, const void *w, size_t ws, int64_t rows, int64_t k, const float *x,
                         size_t xs, int64_t n, float *y, size_t ldy, void *split, int ith, int nth) {
	if ((t != EMV_F32 && t != EMV_F16) || rows <= 0 || k <= 0 || n < 1 || !split || ith < 0 || ith >= nth) return -1;
	if (impl == EMV_BEST) impl = emv_best_impl();
	if (!emv_impl_available(impl)) return -1;
	if (nth > EMV_SPLIT_MAX) return -2;
	emv_split *sp = split;
	// n > 8: passes of 8 rows, then of the rest; the rest's pass rows (the
	// larger; each count divides the next) are the unit.
	int64_t pr = emvf_pass_rows(impl, (n - 1) % EMV_MAXN + 1), units = (rows + pr - 1) / pr;
	int64_t chunk = (int64_t)(65536 / ((size_t)pr * ws)), u0, u1, pf1, done = 0;
	if (chunk < 1) chunk = 1;
	emv_split_begin(sp, nth, units);
	while (emv_split_next(sp, ith, nth, chunk, &u0, &u1, &pf1)) {
		done += u1 - u0;
		int64_t r0 = pr * u0, r1 = pr * u1 < rows ? pr * u1 : rows, rpf = pr * pf1 < rows ? pr * pf1 : rows;
		for (int64_t j0 = 0; j0 < n; j0 += EMV_MAXN)
			emvf_rows(t, impl, (const uint8_t *)w, ws, k, r0, r1, rpf, (const uint8_t *)x + (size_t)j0 * xs, xs,
			          (int)(n - j0 < EMV_MAXN ? n - j0 : EMV_MAXN), y + (size_t)j0 * ldy, ldy);
	}
	emv_split_end(sp, nth);
	return (int)done;
}
