// edgellm matvec kernels, written for this project from ggml's block formats
// (block_q8_0: fp16 d + 32 int8; block_q4_0: fp16 d + 16 bytes of nibbles,
// low nibbles elements 0..15, high nibbles 16..31, value nibble-8).
//
// The arithmetic contract C4 (every implementation here, every n, every row
// split; the i8mm kernel's C8 is in matvec_c8.c):
// for weight row r, activation row j, block b in order,
//     lane[l] = sum_{i=4l}^{4l+3} w[b][i] * a[b][i]     (exact int32, l = 0..7)
//     s       = f32(d_w[b]) * f32(d_a[b])              (one f32 rounding)
//     acc[l]  = fmaf((float)lane[l], s, acc[l])
// then y = ((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) + (acc3+acc7)).
// The lane grouping is what maddubs+madd and vpdpbusd produce. The result
// for (r, j) depends only on weight row r, activation row j and k, so row j
// of an n-row call is bitwise the 1-row call, any split of the rows across
// threads gives the same bits, and scalar, AVX2 and AVX-512 agree bitwise.
// Every fma is explicit; contraction is off so the compiler adds none.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "matvec.h"
#include "emv_scratch.h"
#include "emv_block.h"
#include "emv_prefetch.h"
#include "emv_split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

int emv_pf_off; // emv_prefetch.h

// f32 -> fp16, round to nearest even (what ggml's GGML_FP32_TO_FP16 gives).
static inline uint16_t emv_f2h(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
	if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); // >= 65520 rounds to inf
	if (ax < 0x38800000u) {                                  // below 2^-14: half subnormal
		float a;
		memcpy(&a, &ax, 4);
		return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
	}
	uint32_t mant = ax & 0x7fffff, exp = (ax >> 23) - 112;
	uint32_t h = (exp << 10) | (mant >> 13), rem = mant & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
	return (uint16_t)(sign | h);
}

void emv_quantize_q8_0(const float *x, int n, int k, void *dst) {
	uint8_t *out = (uint8_t *)dst;
	for (int j = 0; j < n; j++) {
		for (int b = 0; b < k / EMV_QK; b++) {
			const float *xb = x + (size_t)j * k + (size_t)b * EMV_QK;
			float amax = 0.0f;
			for (int i = 0; i < EMV_QK; i++) {
				float v = fabsf(xb[i]);
				if (v > amax) amax = v;
			}
			float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
			uint16_t h = emv_f2h(d);
			memcpy(out, &h, 2);
			for (int i = 0; i < EMV_QK; i++) out[2 + i] = (uint8_t)(int8_t)roundf(xb[i] * id);
			out += EMV_Q8_BYTES;
		}
	}
}

// ---- scalar reference (also the path off x86) ----

static inline float emv_hsum8(const float *a) {
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static void emv_scalar(int t, const uint8_t *w, size_t ws, int nb, int64_t r0, int64_t r1,
                       const uint8_t *a, size_t as, int n, float *y, size_t ldy) {
	size_t bsz = t == EMV_Q8_0 ? EMV_Q8_BYTES : EMV_Q4_BYTES;
	for (int64_t r = r0; r < r1; r++) {
		float acc[EMV_MAXN][8] = {{0}};
		const uint8_t *wr = w + (size_t)r * ws;
		for (int b = 0; b < nb; b++) {
			int8_t wq[EMV_QK];
			float dw;
			emv_block_unpack(t, wr + (size_t)b * bsz, wq, &dw);
			for (int j = 0; j < n; j++) {
				const uint8_t *ab = a + (size_t)j * as + (size_t)b * EMV_Q8_BYTES;
				const int8_t *aq = (const int8_t *)(ab + 2);
				float s = dw * emv_h2f(ab);
				for (int l = 0; l < 8; l++) {
					int32_t sum = 0;
					for (int i = 4 * l; i < 4 * l + 4; i++) sum += (int32_t)wq[i] * aq[i];
					acc[j][l] = fmaf((float)sum, s, acc[j][l]);
				}
			}
		}
		for (int j = 0; j < n; j++) y[(size_t)j * ldy + r] = emv_hsum8(acc[j]);
	}
}

typedef void (*emv_fn)(const uint8_t *, size_t, int, int64_t, int64_t, int64_t, const uint8_t *, size_t, float *,
                       size_t);

#if defined(__x86_64__)

#define EMV_T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define EMV_T_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define EMV_INLINE static inline __attribute__((always_inline))

EMV_T_AVX2 EMV_INLINE float emv_h2f_x(const uint8_t *p) {
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}

// The fixed tree of emv_hsum8: v_l = acc_l + acc_{l+4}; (v0+v2) + (v1+v3).
EMV_T_AVX2 EMV_INLINE float emv_hsum256(__m256 acc) {
	__m128 v = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
	v = _mm_add_ps(v, _mm_movehl_ps(v, v));
	v = _mm_add_ss(v, _mm_movehdup_ps(v));
	return _mm_cvtss_f32(v);
}

// The 32 signed weights of one block.
EMV_T_AVX2 EMV_INLINE __m256i emv_load_w(int t, const uint8_t *blk) {
	if (t == EMV_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + 2));
	__m128i q = _mm_loadu_si128((const __m128i *)(blk + 2));
	__m128i m = _mm_set1_epi8(0x0f);
	__m128i lo = _mm_and_si128(q, m), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m);
	return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

// |w| <= 128 and |a| <= 127: maddubs pairs stay below 2^15.
// While row r computes, row r+1 (up to row rpf-1) is prefetched, for n <= 4:
// at n = 8 the kernel runs at ~1 GB/s, bound by its arithmetic, and the
// prefetch measured 0.89-1.08x (RATIONALE "Software prefetch").
EMV_T_AVX2 EMV_INLINE void emv_avx2_row(int t, const uint8_t *w, size_t ws, int nb, const uint8_t *a, size_t as,
                                        int n, float *y, size_t ldy, int64_t r, int64_t rpf) {
	size_t bsz = t == EMV_Q8_0 ? EMV_Q8_BYTES : EMV_Q4_BYTES;
	const uint8_t *wr = w + (size_t)r * ws;
	emv_pf pf = emv_pf_rows(w, ws, (size_t)nb * bsz, r, 1, n <= 4 ? rpf : r + 1, nb);
	const __m256i ones = _mm256_set1_epi16(1);
	__m256 acc[EMV_MAXN];
	for (int j = 0; j < n; j++) acc[j] = _mm256_setzero_ps();
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = wr + (size_t)b * bsz;
		emv_pf_step(&pf, b);
		__m256i wv = emv_load_w(t, blk);
		float dw = emv_h2f_x(blk);
		__m256i aw = _mm256_sign_epi8(wv, wv);
		for (int j = 0; j < n; j++) {
			const uint8_t *ab = a + (size_t)j * as + (size_t)b * EMV_Q8_BYTES;
			__m256i sy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(ab + 2)), wv);
			__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sy), ones);
			__m256 s = _mm256_set1_ps(dw * emv_h2f_x(ab));
			acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc[j]);
		}
	}
	for (int j = 0; j < n; j++) y[(size_t)j * ldy + r] = emv_hsum256(acc[j]);
}

// Rows [r0, r1); the prefetch runs up to row rpf-1 (rpf >= r1: the end of
// what this thread reads next, emv_matvec_split).
EMV_T_AVX2 EMV_INLINE void emv_avx2_n(int t, const uint8_t *w, size_t ws, int nb, int64_t r0, int64_t r1,
                                      int64_t rpf, const uint8_t *a, size_t as, int n, float *y, size_t ldy) {
	for (int64_t r = r0; r < r1; r++) emv_avx2_row(t, w, ws, nb, a, as, n, y, ldy, r, rpf);
}

// AVX-512: two weight rows per zmm (row r in the low half, r+1 in the high
// half), the activation block broadcast to both halves, and no sign
// juggling in the inner loop: vpdpbusd multiplies unsigned by signed bytes,
// so
//   Q4_0: lane = dpbusd(-8*lanesum(a), nibbles, a)       (nibbles unsigned)
//   Q8_0: lane = dpbusd(-128*lanesum(w), a + 128, w)     (a biased unsigned)
// which are the exact integers sum_i (nibble_i - 8) a_i and sum_i a_i w_i
// of the contract. The per-activation parts (-8*lanesum(a), a+128 and the
// f32 scale) are prepared once per call (emv_prep) into a per-thread
// scratch, so the inner loop per (block, activation row) is a broadcast
// load, one vpdpbusd, the scale product, a conversion and the fma.
typedef struct {
	const float *da;    // [n][nb] activation scales, f32
	const uint8_t *aux; // [n][nb][32]: Q4_0: int32 -8*lanesum(a); Q8_0: a+128
} emv_prep_t;

// One row pair's weights of block b: the 64 bytes dpbusd takes (Q4_0: the
// raw nibbles, lo0 hi0 lo1 hi1; Q8_0: the signed weights), the scales, and
// for Q8_0 the accumulator start -128*lanesum(w).
EMV_T_AVX512 EMV_INLINE void emv_pair_w(int t, const uint8_t *b0, const uint8_t *b1, __m512i *q, __m512 *dw,
                                        __m512i *init) {
	*dw = _mm512_insertf32x8(_mm512_set1_ps(emv_h2f_x(b0)), _mm256_set1_ps(emv_h2f_x(b1)), 1);
	if (t == EMV_Q4_0) {
		__m512i v = _mm512_inserti32x4(_mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(b0 + 2))),
		                               _mm_loadu_si128((const __m128i *)(b1 + 2)), 2);
		v = _mm512_shuffle_i32x4(v, v, 0xA0); // q0, q0, q1, q1
		*q = _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFF00FF00u, v, 4), _mm512_set1_epi8(0x0f));
		*init = _mm512_setzero_si512();
		return;
	}
	*q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b0 + 2))),
	                        _mm256_loadu_si256((const __m256i *)(b1 + 2)), 1);
	*init = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), *q));
}

// The integer lanes of one row pair and activation row: Q4_0 starts from
// -8*lanesum(a) (aux) and multiplies nibbles by a; Q8_0 starts from init
// and multiplies a+128 (aux) by w.
EMV_T_AVX512 EMV_INLINE __m512i emv_pair_dot(int t, __m512i q, __m512i init, __m512i av, __m512i aux) {
	return t == EMV_Q4_0 ? _mm512_dpbusd_epi32(aux, q, av) : _mm512_dpbusd_epi32(init, aux, q);
}

EMV_T_AVX512 EMV_INLINE void emv_avx512_n(int t, const uint8_t *w, size_t ws, int nb, int64_t r0, int64_t r1,
                                          int64_t rpf, const uint8_t *a, size_t as, int n, float *y, size_t ldy,
                                          const emv_prep_t *pp) {
	size_t bsz = t == EMV_Q8_0 ? EMV_Q8_BYTES : EMV_Q4_BYTES;
	int64_t r = r0;
	// Four rows at a time: two independent fma chains per activation row
	// (more in flight at n = 1), one activation load for both pairs.
	for (; r + 3 < r1; r += 4) {
		const uint8_t *w0 = w + (size_t)r * ws;
		// While these 4 rows compute, the next 4 are prefetched.
		emv_pf pf = emv_pf_rows(w, ws, (size_t)nb * bsz, r, 4, rpf, nb);
		__m512 acc[EMV_MAXN], acc2[EMV_MAXN];
		for (int j = 0; j < n; j++) acc[j] = acc2[j] = _mm512_setzero_ps();
		for (int b = 0; b < nb; b++) {
			const uint8_t *b0 = w0 + (size_t)b * bsz;
			emv_pf_step(&pf, b);
			__m512i q, q2, init, init2;
			__m512 dw, dw2;
			emv_pair_w(t, b0, b0 + ws, &q, &dw, &init);
			emv_pair_w(t, b0 + 2 * ws, b0 + 3 * ws, &q2, &dw2, &init2);
			for (int j = 0; j < n; j++) {
				size_t jb = (size_t)j * nb + b;
				__m512i av = t == EMV_Q4_0 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a + (size_t)j * as + (size_t)b * EMV_Q8_BYTES + 2)))
				                           : _mm512_setzero_si512();
				__m512i aux = _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i *)(pp->aux + jb * 32)));
				__m512 da = _mm512_set1_ps(pp->da[jb]);
				acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(emv_pair_dot(t, q, init, av, aux)), _mm512_mul_ps(dw, da), acc[j]);
				acc2[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(emv_pair_dot(t, q2, init2, av, aux)), _mm512_mul_ps(dw2, da), acc2[j]);
			}
		}
		for (int j = 0; j < n; j++) {
			float *yj = y + (size_t)j * ldy + r;
			yj[0] = emv_hsum256(_mm512_castps512_ps256(acc[j]));
			yj[1] = emv_hsum256(_mm512_extractf32x8_ps(acc[j], 1));
			yj[2] = emv_hsum256(_mm512_castps512_ps256(acc2[j]));
			yj[3] = emv_hsum256(_mm512_extractf32x8_ps(acc2[j], 1));
		}
	}
	for (; r + 1 < r1; r += 2) {
		const uint8_t *w0 = w + (size_t)r * ws;
		emv_pf pf = emv_pf_rows(w, ws, (size_t)nb * bsz, r, 2, rpf, nb);
		__m512 acc[EMV_MAXN];
		for (int j = 0; j < n; j++) acc[j] = _mm512_setzero_ps();
		for (int b = 0; b < nb; b++) {
			const uint8_t *b0 = w0 + (size_t)b * bsz;
			emv_pf_step(&pf, b);
			__m512i q, init;
			__m512 dw;
			emv_pair_w(t, b0, b0 + ws, &q, &dw, &init);
			for (int j = 0; j < n; j++) {
				size_t jb = (size_t)j * nb + b;
				__m512i av = t == EMV_Q4_0 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a + (size_t)j * as + (size_t)b * EMV_Q8_BYTES + 2)))
				                           : _mm512_setzero_si512();
				__m512i aux = _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i *)(pp->aux + jb * 32)));
				__m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(pp->da[jb]));
				acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(emv_pair_dot(t, q, init, av, aux)), s, acc[j]);
			}
		}
		for (int j = 0; j < n; j++) {
			y[(size_t)j * ldy + r] = emv_hsum256(_mm512_castps512_ps256(acc[j]));
			y[(size_t)j * ldy + r + 1] = emv_hsum256(_mm512_extractf32x8_ps(acc[j], 1));
		}
	}
	if (r < r1) emv_avx2_row(t, w, ws, nb, a, as, n, y, ldy, r, rpf);
}

// emv_prep fills the per-activation parts of the AVX-512 kernel for n rows.
EMV_T_AVX512 static void emv_prep(int t, int nb, const uint8_t *a, size_t as, int n, float *da, uint8_t *aux) {
	const __m256i ones = _mm256_set1_epi8(1), u128 = _mm256_set1_epi8((char)0x80);
	for (int j = 0; j < n; j++) {
		for (int b = 0; b < nb; b++) {
			const uint8_t *ab = a + (size_t)j * as + (size_t)b * EMV_Q8_BYTES;
			size_t jb = (size_t)j * nb + b;
			da[jb] = emv_h2f_x(ab);
			__m256i av = _mm256_loadu_si256((const __m256i *)(ab + 2));
			__m256i v = t == EMV_Q4_0 ? _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, av), 3))
			                          : _mm256_xor_si256(av, u128);
			_mm256_store_si256((__m256i *)(aux + jb * 32), v);
		}
	}
}

// One function per (implementation, type, n): the accumulators stay in
// registers and the j loop unrolls.
#define EMV_FN(ISA, T, TN, N)                                                                              \
	EMV_T_##ISA static void emv_##ISA##_##TN##_##N(const uint8_t *w, size_t ws, int nb, int64_t r0,       \
	                                               int64_t r1, int64_t rpf, const uint8_t *a, size_t as,   \
	                                               float *y, size_t ldy) {                                 \
		emv_##ISA##_body(T, w, ws, nb, r0, r1, rpf, a, as, N, y, ldy);                                 \
	}
#define EMV_FN512(T, TN, N)                                                                                \
	EMV_T_AVX512 static void emv_AVX512_##TN##_##N(const uint8_t *w, size_t ws, int nb, int64_t r0,         \
	                                               int64_t r1, int64_t rpf, const uint8_t *a, size_t as,   \
	                                               float *y, size_t ldy, const emv_prep_t *pp) {           \
		emv_avx512_n(T, w, ws, nb, r0, r1, rpf, a, as, N, y, ldy, pp);                                 \
	}
#define emv_AVX2_body emv_avx2_n
#define EMV_EACH_N512(T, TN)                                                                               \
	EMV_FN512(T, TN, 1) EMV_FN512(T, TN, 2) EMV_FN512(T, TN, 3) EMV_FN512(T, TN, 4)                      \
	EMV_FN512(T, TN, 5) EMV_FN512(T, TN, 6) EMV_FN512(T, TN, 7) EMV_FN512(T, TN, 8)
#define EMV_EACH_N(ISA, T, TN)                                                                             \
	EMV_FN(ISA, T, TN, 1) EMV_FN(ISA, T, TN, 2) EMV_FN(ISA, T, TN, 3) EMV_FN(ISA, T, TN, 4)              \
	EMV_FN(ISA, T, TN, 5) EMV_FN(ISA, T, TN, 6) EMV_FN(ISA, T, TN, 7) EMV_FN(ISA, T, TN, 8)
#define EMV_TAB(ISA, TN)                                                                                   \
	{ emv_##ISA##_##TN##_1, emv_##ISA##_##TN##_2, emv_##ISA##_##TN##_3, emv_##ISA##_##TN##_4,             \
	  emv_##ISA##_##TN##_5, emv_##ISA##_##TN##_6, emv_##ISA##_##TN##_7, emv_##ISA##_##TN##_8 }
EMV_EACH_N(AVX2, EMV_Q8_0, q8)
EMV_EACH_N(AVX2, EMV_Q4_0, q4)
EMV_EACH_N512(EMV_Q8_0, q8)
EMV_EACH_N512(EMV_Q4_0, q4)
typedef void (*emv_fn512)(const uint8_t *, size_t, int, int64_t, int64_t, int64_t, const uint8_t *, size_t, float *,
                          size_t, const emv_prep_t *);
static const emv_fn emv_avx2_q8[EMV_MAXN] = EMV_TAB(AVX2, q8);
static const emv_fn emv_avx2_q4[EMV_MAXN] = EMV_TAB(AVX2, q4);
static const emv_fn512 emv_avx512_q8[EMV_MAXN] = EMV_TAB(AVX512, q8);
static const emv_fn512 emv_avx512_q4[EMV_MAXN] = EMV_TAB(AVX512, q4);

static int emv_detect(void) {
	__builtin_cpu_init();
	if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
		return EMV_SCALAR;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512vnni"))
		return EMV_AVX512VNNI;
	return EMV_AVX2;
}
#elif defined(__aarch64__)
static int emv_detect(void) { return emv_neon_detect(); }
#else
static int emv_detect(void) { return EMV_SCALAR; }
#endif

int emv_best_impl(void) {
	static int best = -1; // racy but idempotent
	if (best < 0) best = emv_detect();
	return best;
}

int emv_impl_available(int impl) {
	int best = emv_best_impl();
	if (impl == EMV_SCALAR || impl == EMV_SCALAR8) return 1; // the two contracts' references
#if defined(__x86_64__)
	return impl >= EMV_SCALAR && impl <= best;
#elif defined(__aarch64__)
	return (impl == EMV_NEONDOT && best >= EMV_NEONDOT) || (impl == EMV_NEONI8MM && best == EMV_NEONI8MM);
#else
	return 0;
#endif
}

// emv_rows runs impl's kernel on weight rows [r0, r1) for nn <= 8
// activation rows, prefetching up to row rpf-1 (the kernels that prefetch);
// pp is the AVX-512 kernel's prepared activations (emv_prep_t; NULL: the
// AVX2 kernel runs instead, the same bits).
static void emv_rows(int t, int impl, const uint8_t *wp, size_t ws, int nb, int64_t r0, int64_t r1, int64_t rpf,
                     const uint8_t *aj, size_t as, int nn, float *yj, size_t ldy, const void *pp) {
#if defined(__x86_64__)
	if (impl == EMV_AVX512VNNI && pp) {
		(t == EMV_Q8_0 ? emv_avx512_q8 : emv_avx512_q4)[nn - 1](wp, ws, nb, r0, r1, rpf, aj, as, yj, ldy, pp);
		return;
	}
	if (impl == EMV_AVX2 || impl == EMV_AVX512VNNI) {
		(t == EMV_Q8_0 ? emv_avx2_q8 : emv_avx2_q4)[nn - 1](wp, ws, nb, r0, r1, rpf, aj, as, yj, ldy);
		return;
	}
#elif defined(__aarch64__)
	if (emv_neon_matvec(t, impl, wp, ws, nb, r0, r1, aj, as, nn, yj, ldy)) return;
#endif
	(void)rpf, (void)pp;
	(impl == EMV_SCALAR8 ? emv_scalar8 : emv_scalar)(t, wp, ws, nb, r0, r1, aj, as, nn, yj, ldy);
}

// emv_prep_room: what emv_prep_scratch fills in.
#if defined(__x86_64__)
typedef emv_prep_t emv_prep_room;
#else
typedef struct {
	int unused;
} emv_prep_room;
#endif

// emv_prep_scratch: the AVX-512 kernel's prepared activations for nn rows in
// this thread's scratch (*pp), or NULL (another impl, or no memory: the
// AVX2 kernel gives the same bits).
static const void *emv_prep_scratch(int t, int impl, int nb, const uint8_t *aj, size_t as, int nn,
                                    emv_prep_room *pp) {
#if defined(__x86_64__)
	uint8_t *scr = impl == EMV_AVX512VNNI ? emv_scratch_get(EMV_SCRATCH_MATVEC, (size_t)nn * nb * 36 + 64) : NULL;
	if (!scr) return NULL;
	float *da = (float *)scr;
	uint8_t *aux = scr + (((size_t)nn * nb * 4 + 63) & ~(size_t)63);
	emv_prep(t, nb, aj, as, nn, da, aux);
	pp->da = da, pp->aux = aux;
	return pp;
#else
	(void)t, (void)impl, (void)nb, (void)aj, (void)as, (void)nn, (void)pp;
	return NULL;
#endif
}

// emv_prep_part: activation rows j0.. of prepared pp (NULL stays NULL).
static const void *emv_prep_part(const void *pp, int64_t j0, int nb, emv_prep_room *part) {
#if defined(__x86_64__)
	if (!pp) return NULL;
	const emv_prep_t *p = pp;
	part->da = p->da + (size_t)j0 * nb, part->aux = p->aux + (size_t)j0 * nb * 32;
	return part;
#else
	(void)pp, (void)j0, (void)nb, (void)part;
	return NULL;
#endif
}

int emv_matvec(int t, int impl, const void *w, size_t ws, int64_t k, int64_t r0, int64_t r1,
               const void *a, size_t as, int64_t n, float *y, size_t ldy) {
	if ((t != EMV_Q8_0 && t != EMV_Q4_0) || k <= 0 || k % EMV_QK != 0 || n < 1 || r0 < 0 || r1 < r0)
		return -1;
	if (impl == EMV_BEST) impl = emv_best_impl();
	if (!emv_impl_available(impl)) return -1;
	int nb = (int)(k / EMV_QK);
	const uint8_t *wp = (const uint8_t *)w, *ap = (const uint8_t *)a;
	for (int64_t j0 = 0; j0 < n; j0 += EMV_MAXN) {
		int nn = (int)(n - j0 < EMV_MAXN ? n - j0 : EMV_MAXN);
		const uint8_t *aj = ap + (size_t)j0 * as;
		emv_prep_room room;
		const void *pp = r1 - r0 > 1 ? emv_prep_scratch(t, impl, nb, aj, as, nn, &room) : NULL;
		emv_rows(t, impl, wp, ws, nb, r0, r1, r1, aj, as, nn, y + (size_t)j0 * ldy, ldy, pp);
	}
	return 0;
}

// Rows per pass of impl's quantised kernel: the unit the threads share, so
// every chunk is whole passes.
static int64_t emv_pass_rows(int impl) { return impl == EMV_AVX512VNNI ? 4 : 1; }

int emv_matvec_split(int t, int impl, const void *w, size_t ws, int64_t rows, int64_t k, const void *a, size_t as,
                     int64_t n, float *y, size_t ldy, void *split, int ith, int nth) {
	if ((t != EMV_Q8_0 && t != EMV_Q4_0) || rows <= 0 || k <= 0 || k % EMV_QK != 0 || n < 1 || !split ||
	    ith < 0 || ith >= nth)
		return -1;
	if (impl == EMV_BEST) impl = emv_best_impl();
	if (!emv_impl_available(impl)) return -1;
	if (nth > EMV_SPLIT_MAX || impl == EMV_NEONDOT || impl == EMV_NEONI8MM) return -2;
	int nb = (int)(k / EMV_QK);
	emv_split *sp = split;
	int64_t pr = emv_pass_rows(impl), units = (rows + pr - 1) / pr;
	int64_t chunk = (int64_t)(65536 / ((size_t)pr * ws)), u0, u1, pf1, done = 0;
	if (chunk < 1) chunk = 1;
	emv_split_begin(sp, nth, units);
	// Every activation row prepared once (n > 8: a chunk's rows are read
	// once per 8, the second time from cache).
	emv_prep_room room, part;
	const void *pp = emv_prep_scratch(t, impl, nb, (const uint8_t *)a, as, (int)n, &room);
	while (emv_split_next(sp, ith, nth, chunk, &u0, &u1, &pf1)) {
		done += u1 - u0;
		int64_t r0 = pr * u0, r1 = pr * u1 < rows ? pr * u1 : rows, rpf = pr * pf1 < rows ? pr * pf1 : rows;
		for (int64_t j0 = 0; j0 < n; j0 += EMV_MAXN)
			emv_rows(t, impl, (const uint8_t *)w, ws, nb, r0, r1, rpf, (const uint8_t *)a + (size_t)j0 * as, as,
			         (int)(n - j0 < EMV_MAXN ? n - j0 : EMV_MAXN), y + (size_t)j0 * ldy, ldy,
			         emv_prep_part(pp, j0, nb, &part));
	}
	emv_split_end(sp, nth);
	return (int)done;
}
