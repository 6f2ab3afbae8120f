// edgellm matvec kernels. Written for this project from the ggml block
// format (block_q8_0: fp16 d + 32 int8; block_q4_0: fp16 d + 16 bytes of
// nibbles, low nibbles elements 0..15, high nibbles 16..31, value nibble-8).
//
// Reduction order (the batch-invariance contract): for output row r and
// activation row j, eight f32 lanes start at 0; for blocks b = 0..nb-1 in
// order, lane l += fmaf(dw_b * dx_jb, (float)lane_l(b)) where lane_l(b) is
// the exact integer dot of elements 4l..4l+3 of block b; the lanes are then
// summed in one fixed tree (reduce8). Integer lane sums are exact on every
// ISA and dw is the exact fp16->f32 conversion, so every implementation,
// every n and every thread split produces the same bits.
#include "matvec.h"
#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef struct { uint16_t d; int8_t qs[32]; } __attribute__((packed)) bq8;
typedef struct { uint16_t d; uint8_t qs[16]; } __attribute__((packed)) bq4;

static inline float fp16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	if (exp == 0) {
		if (man == 0) {
			bits = sign;
		} else { // subnormal: exact as man * 2^-24
			float f = (float)man * (1.0f / 16777216.0f);
			memcpy(&bits, &f, 4);
			bits |= sign;
		}
	} else if (exp == 31) {
		bits = sign | 0x7f800000u | (man << 13);
	} else {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

void emv_quantize_x(const float *x, emv_xblock *xq, int k) {
	int nb = k / EMV_QK;
	for (int b = 0; b < nb; b++) {
		const float *v = x + b * EMV_QK;
		float amax = 0.0f;
		for (int i = 0; i < EMV_QK; i++) {
			float a = fabsf(v[i]);
			if (a > amax) amax = a;
		}
		float d = amax / 127.0f;
		float id = d != 0.0f ? 1.0f / d : 0.0f;
		int32_t s = 0;
		for (int i = 0; i < EMV_QK; i++) {
			int q = (int)roundf(v[i] * id);
			if (q > 127) q = 127;
			if (q < -127) q = -127;
			xq[b].qs[i] = (int8_t)q;
			s += q;
		}
		xq[b].d = d;
		xq[b].s = s;
	}
}

// ---- scalar reference ----
// Lane l of a block covers elements 4l..4l+3 (the grouping of maddubs+madd
// and of vpdpbusd), acc[j][l] = fmaf(dw*dx, (float)lane_l, acc[j][l]) over
// blocks in order, then the fixed tree ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).

static inline float reduce8(const float *a) {
	float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
	return (t0 + t2) + (t1 + t3);
}

static inline void wq_scalar(int type, const uint8_t *blk, int8_t *q, float *d) {
	if (type == 8) {
		const bq8 *b = (const bq8 *)blk;
		*d = fp16_to_f32(b->d);
		memcpy(q, b->qs, 32);
		return;
	}
	const bq4 *b = (const bq4 *)blk;
	*d = fp16_to_f32(b->d);
	for (int i = 0; i < 16; i++) {
		q[i] = (int8_t)((b->qs[i] & 0xf) - 8);
		q[i + 16] = (int8_t)((b->qs[i] >> 4) - 8);
	}
}

static void mul_scalar(int type, const uint8_t *w, long ws, int nb, int r0, int r1,
                       const emv_xblock *xq, int n, float *y, long ldy) {
	int bb = type == 8 ? 34 : 18;
	for (int r = r0; r < r1; r++) {
		const uint8_t *wr = w + (long)r * ws;
		float acc[EMV_MAXN][8] = {{0}};
		for (int b = 0; b < nb; b++) {
			int8_t q[32];
			float dw;
			wq_scalar(type, wr + (long)b * bb, q, &dw);
			for (int j = 0; j < n; j++) {
				const emv_xblock *x = xq + (long)j * nb + b;
				float sc = dw * x->d;
				for (int l = 0; l < 8; l++) {
					int32_t lane = 0;
					for (int i = 4 * l; i < 4 * l + 4; i++) lane += (int32_t)q[i] * x->qs[i];
					acc[j][l] = fmaf(sc, (float)lane, acc[j][l]);
				}
			}
		}
		for (int j = 0; j < n; j++) y[(long)j * ldy + r] = reduce8(acc[j]);
	}
}

#if defined(__x86_64__)

#define AVX2_T __attribute__((target("avx2,fma,f16c")))
#define VNNI_T __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

// Signed weights of one block, elements 0..31, and its scale.
AVX2_T static inline __m256i wq_avx2(int type, const uint8_t *blk, float *d) {
	*d = _cvtsh_ss(*(const uint16_t *)blk);
	if (type == 8) return _mm256_loadu_si256((const __m256i *)(blk + 2));
	__m128i b = _mm_loadu_si128((const __m128i *)(blk + 2));
	__m128i lo = _mm_and_si128(b, _mm_set1_epi8(0xf));
	__m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0xf));
	return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

AVX2_T static inline float reduce8_avx2(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); // t_l = a_l + a_{l+4}
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                         // t0+t2, t1+t3
	s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));                                  // (t0+t2)+(t1+t3)
	return _mm_cvtss_f32(s);
}

// |w| <= 128 and |x| <= 127: maddubs pairs stay below 2^15 (ggml's weights
// are -127..127 for Q8_0 and -8..7 for Q4_0).
AVX2_T static inline __attribute__((always_inline)) void mul_avx2(int type, const uint8_t *w, long ws, int nb, int r0, int r1,
                            const emv_xblock *xq, int n, float *y, long ldy) {
	int bb = type == 8 ? 34 : 18;
	const __m256i ones = _mm256_set1_epi16(1);
	for (int r = r0; r < r1; r++) {
		const uint8_t *wr = w + (long)r * ws;
		__m256 acc[EMV_MAXN];
		for (int j = 0; j < n; j++) acc[j] = _mm256_setzero_ps();
		for (int b = 0; b < nb; b++) {
			float dw;
			__m256i wv = wq_avx2(type, wr + (long)b * bb, &dw);
			__m256i aw = _mm256_sign_epi8(wv, wv);
			for (int j = 0; j < n; j++) {
				const emv_xblock *x = xq + (long)j * nb + b;
				__m256i xv = _mm256_loadu_si256((const __m256i *)x->qs);
				__m256i lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, wv)), ones);
				acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x->d), _mm256_cvtepi32_ps(lanes), acc[j]);
			}
		}
		for (int j = 0; j < n; j++) y[(long)j * ldy + r] = reduce8_avx2(acc[j]);
	}
}

VNNI_T static inline __attribute__((always_inline)) void mul_vnni(int type, const uint8_t *w, long ws, int nb, int r0, int r1,
                            const emv_xblock *xq, int n, float *y, long ldy) {
	int bb = type == 8 ? 34 : 18;
	for (int r = r0; r < r1; r++) {
		const uint8_t *wr = w + (long)r * ws;
		__m256 acc[EMV_MAXN];
		for (int j = 0; j < n; j++) acc[j] = _mm256_setzero_ps();
		for (int b = 0; b < nb; b++) {
			float dw;
			__m256i wv = wq_avx2(type, wr + (long)b * bb, &dw);
			__m256i aw = _mm256_abs_epi8(wv);
			for (int j = 0; j < n; j++) {
				const emv_xblock *x = xq + (long)j * nb + b;
				__m256i xv = _mm256_loadu_si256((const __m256i *)x->qs);
				__m256i lanes = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, _mm256_sign_epi8(xv, wv));
				acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x->d), _mm256_cvtepi32_ps(lanes), acc[j]);
			}
		}
		for (int j = 0; j < n; j++) y[(long)j * ldy + r] = reduce8_avx2(acc[j]);
	}
}

// Specialise on the weight type and on n (constant n: the accumulators stay
// in registers and the j loop unrolls).
#define SPECIALISE(T, name, f)                                                                 \
	T static void name(int type, const uint8_t *w, long ws, int nb, int r0, int r1,        \
	                   const emv_xblock *xq, int n, float *y, long ldy) {                  \
		switch (n * 16 + type) {                                                       \
		case 1 * 16 + 8: f(8, w, ws, nb, r0, r1, xq, 1, y, ldy); break;                \
		case 2 * 16 + 8: f(8, w, ws, nb, r0, r1, xq, 2, y, ldy); break;                \
		case 3 * 16 + 8: f(8, w, ws, nb, r0, r1, xq, 3, y, ldy); break;                \
		case 4 * 16 + 8: f(8, w, ws, nb, r0, r1, xq, 4, y, ldy); break;                \
		case 5 * 16 + 8: f(8, w, ws, nb, r0, r1, xq, 5, y, ldy); break;                \
		case 6 * 16 + 8: f(8, w, ws, nb, r0, r1, xq, 6, y, ldy); break;                \
		case 7 * 16 + 8: f(8, w, ws, nb, r0, r1, xq, 7, y, ldy); break;                \
		case 8 * 16 + 8: f(8, w, ws, nb, r0, r1, xq, 8, y, ldy); break;                \
		case 1 * 16 + 4: f(4, w, ws, nb, r0, r1, xq, 1, y, ldy); break;                \
		case 2 * 16 + 4: f(4, w, ws, nb, r0, r1, xq, 2, y, ldy); break;                \
		case 3 * 16 + 4: f(4, w, ws, nb, r0, r1, xq, 3, y, ldy); break;                \
		case 4 * 16 + 4: f(4, w, ws, nb, r0, r1, xq, 4, y, ldy); break;                \
		case 5 * 16 + 4: f(4, w, ws, nb, r0, r1, xq, 5, y, ldy); break;                \
		case 6 * 16 + 4: f(4, w, ws, nb, r0, r1, xq, 6, y, ldy); break;                \
		case 7 * 16 + 4: f(4, w, ws, nb, r0, r1, xq, 7, y, ldy); break;                \
		case 8 * 16 + 4: f(4, w, ws, nb, r0, r1, xq, 8, y, ldy); break;                \
		default: f(type, w, ws, nb, r0, r1, xq, n, y, ldy);                            \
		}                                                                              \
	}
SPECIALISE(AVX2_T, mul_avx2_s, mul_avx2)
SPECIALISE(VNNI_T, mul_vnni_s, mul_vnni)

static int best_impl = -1;

int emv_best_impl(void) {
	if (best_impl >= 0) return best_impl;
	__builtin_cpu_init();
	int b = EMV_SCALAR;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
		b = EMV_AVX2;
		if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
		    __builtin_cpu_supports("avx512bw"))
			b = EMV_AVX512VNNI;
	}
	best_impl = b;
	return b;
}
#else
int emv_best_impl(void) { return EMV_SCALAR; }
#endif

static int mul(int type, int impl, const void *w, long ws, int nb, int r0, int r1,
               const emv_xblock *xq, int n, float *y, long ldy) {
	if (n < 1 || n > EMV_MAXN || impl < 0 || impl > emv_best_impl()) return -1;
#if defined(__x86_64__)
	if (impl == EMV_AVX512VNNI) { mul_vnni_s(type, w, ws, nb, r0, r1, xq, n, y, ldy); return 0; }
	if (impl == EMV_AVX2) { mul_avx2_s(type, w, ws, nb, r0, r1, xq, n, y, ldy); return 0; }
#endif
	mul_scalar(type, w, ws, nb, r0, r1, xq, n, y, ldy);
	return 0;
}

int emv_mul_q8_0(int impl, const void *w, long ws, int nb, int r0, int r1,
                 const emv_xblock *xq, int n, float *y, long ldy) {
	return mul(8, impl, w, ws, nb, r0, r1, xq, n, y, ldy);
}

int emv_mul_q4_0(int impl, const void *w, long ws, int nb, int r0, int r1,
                 const emv_xblock *xq, int n, float *y, long ldy) {
	return mul(4, impl, w, ws, nb, r0, r1, xq, n, y, ldy);
}
