// edgellm matvec kernels. Written for this project from the ggml block
// format (block_q8_0: fp16 d + 32 int8; block_q4_0: fp16 d + 16 bytes of
// nibbles, low nibbles elements 0..15, high nibbles 16..31, value nibble-8).
//
// Reduction order (the batch-invariance contract): for output row r and
// activation row j, acc starts at 0.0f and, for blocks b = 0..nb-1 in order,
// acc = fmaf(dw_b * dx_jb, (float)isum_jb, acc), where isum is the exact
// integer dot product of the block. isum is exact on every ISA (int32), dw is
// the exact fp16->f32 conversion, so every implementation, every n and every
// thread split produces the same bits.
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

static void q8_scalar(const uint8_t *w, long ws, int nb, int r0, int r1,
                      const emv_xblock *xq, int n, float *y, long ldy) {
	for (int r = r0; r < r1; r++) {
		const bq8 *wb = (const bq8 *)(w + (long)r * ws);
		float acc[EMV_MAXN] = {0};
		for (int b = 0; b < nb; b++) {
			float dw = fp16_to_f32(wb[b].d);
			for (int j = 0; j < n; j++) {
				const emv_xblock *x = xq + (long)j * nb + b;
				int32_t isum = 0;
				for (int i = 0; i < 32; i++) isum += (int32_t)wb[b].qs[i] * x->qs[i];
				acc[j] = fmaf(dw * x->d, (float)isum, acc[j]);
			}
		}
		for (int j = 0; j < n; j++) y[(long)j * ldy + r] = acc[j];
	}
}

static void q4_scalar(const uint8_t *w, long ws, int nb, int r0, int r1,
                      const emv_xblock *xq, int n, float *y, long ldy) {
	for (int r = r0; r < r1; r++) {
		const bq4 *wb = (const bq4 *)(w + (long)r * ws);
		float acc[EMV_MAXN] = {0};
		for (int b = 0; b < nb; b++) {
			float dw = fp16_to_f32(wb[b].d);
			for (int j = 0; j < n; j++) {
				const emv_xblock *x = xq + (long)j * nb + b;
				int32_t isum = 0;
				for (int i = 0; i < 16; i++) {
					isum += ((int32_t)(wb[b].qs[i] & 0xf) - 8) * x->qs[i];
					isum += ((int32_t)(wb[b].qs[i] >> 4) - 8) * x->qs[i + 16];
				}
				acc[j] = fmaf(dw * x->d, (float)isum, acc[j]);
			}
		}
		for (int j = 0; j < n; j++) y[(long)j * ldy + r] = acc[j];
	}
}

#if defined(__x86_64__)

#define AVX2_T __attribute__((target("avx2,fma,f16c")))
#define VNNI_T __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

AVX2_T static inline int32_t hsum_i32_avx2(__m256i v) {
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

// u (unsigned bytes 0..255) times s (signed bytes), exact int32 sum of 32.
AVX2_T static inline __m256i dot_us_avx2(__m256i u, __m256i s) {
	__m256i p16 = _mm256_maddubs_epi16(u, s); // |pair| <= 2*255*127 may saturate: callers keep u <= 128
	return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

AVX2_T static void q8_avx2(const uint8_t *w, long ws, int nb, int r0, int r1,
                           const emv_xblock *xq, int n, float *y, long ldy) {
	for (int r = r0; r < r1; r++) {
		const bq8 *wb = (const bq8 *)(w + (long)r * ws);
		float acc[EMV_MAXN] = {0};
		for (int b = 0; b < nb; b++) {
			float dw = _cvtsh_ss(wb[b].d);
			__m256i wv = _mm256_loadu_si256((const __m256i *)wb[b].qs);
			__m256i aw = _mm256_sign_epi8(wv, wv); // |w| <= 127 (ggml q8_0 weights)
			for (int j = 0; j < n; j++) {
				const emv_xblock *x = xq + (long)j * nb + b;
				__m256i xv = _mm256_loadu_si256((const __m256i *)x->qs);
				int32_t isum = hsum_i32_avx2(dot_us_avx2(aw, _mm256_sign_epi8(xv, wv)));
				acc[j] = fmaf(dw * x->d, (float)isum, acc[j]);
			}
		}
		for (int j = 0; j < n; j++) y[(long)j * ldy + r] = acc[j];
	}
}

AVX2_T static inline __m256i unpack_q4_avx2(const uint8_t *qs) {
	__m128i b = _mm_loadu_si128((const __m128i *)qs);
	__m128i lo = _mm_and_si128(b, _mm_set1_epi8(0xf));
	__m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0xf));
	return _mm256_set_m128i(hi, lo); // unsigned 0..15, elements 0..31
}

AVX2_T static void q4_avx2(const uint8_t *w, long ws, int nb, int r0, int r1,
                           const emv_xblock *xq, int n, float *y, long ldy) {
	for (int r = r0; r < r1; r++) {
		const bq4 *wb = (const bq4 *)(w + (long)r * ws);
		float acc[EMV_MAXN] = {0};
		for (int b = 0; b < nb; b++) {
			float dw = _cvtsh_ss(wb[b].d);
			__m256i u = unpack_q4_avx2(wb[b].qs);
			for (int j = 0; j < n; j++) {
				const emv_xblock *x = xq + (long)j * nb + b;
				__m256i xv = _mm256_loadu_si256((const __m256i *)x->qs);
				int32_t isum = hsum_i32_avx2(dot_us_avx2(u, xv)) - 8 * x->s;
				acc[j] = fmaf(dw * x->d, (float)isum, acc[j]);
			}
		}
		for (int j = 0; j < n; j++) y[(long)j * ldy + r] = acc[j];
	}
}

// AVX-512 VNNI: vpdpbusd on 256-bit lanes (AVX512VL), two blocks at a time
// per activation row; the block sums are still taken one block at a time.
VNNI_T static inline int32_t hsum_i32_vnni(__m256i v) {
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

VNNI_T static void q8_vnni(const uint8_t *w, long ws, int nb, int r0, int r1,
                           const emv_xblock *xq, int n, float *y, long ldy) {
	for (int r = r0; r < r1; r++) {
		const bq8 *wb = (const bq8 *)(w + (long)r * ws);
		float acc[EMV_MAXN] = {0};
		for (int b = 0; b < nb; b++) {
			float dw = _cvtsh_ss(wb[b].d);
			__m256i wv = _mm256_loadu_si256((const __m256i *)wb[b].qs);
			__m256i aw = _mm256_abs_epi8(wv);
			for (int j = 0; j < n; j++) {
				const emv_xblock *x = xq + (long)j * nb + b;
				__m256i xv = _mm256_loadu_si256((const __m256i *)x->qs);
				__m256i d = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, _mm256_sign_epi8(xv, wv));
				acc[j] = fmaf(dw * x->d, (float)hsum_i32_vnni(d), acc[j]);
			}
		}
		for (int j = 0; j < n; j++) y[(long)j * ldy + r] = acc[j];
	}
}

VNNI_T static void q4_vnni(const uint8_t *w, long ws, int nb, int r0, int r1,
                           const emv_xblock *xq, int n, float *y, long ldy) {
	for (int r = r0; r < r1; r++) {
		const bq4 *wb = (const bq4 *)(w + (long)r * ws);
		float acc[EMV_MAXN] = {0};
		for (int b = 0; b < nb; b++) {
			float dw = _cvtsh_ss(wb[b].d);
			__m128i bb = _mm_loadu_si128((const __m128i *)wb[b].qs);
			__m128i lo = _mm_and_si128(bb, _mm_set1_epi8(0xf));
			__m128i hi = _mm_and_si128(_mm_srli_epi16(bb, 4), _mm_set1_epi8(0xf));
			__m256i u = _mm256_set_m128i(hi, lo);
			for (int j = 0; j < n; j++) {
				const emv_xblock *x = xq + (long)j * nb + b;
				__m256i xv = _mm256_loadu_si256((const __m256i *)x->qs);
				__m256i d = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, xv);
				acc[j] = fmaf(dw * x->d, (float)(hsum_i32_vnni(d) - 8 * x->s), acc[j]);
			}
		}
		for (int j = 0; j < n; j++) y[(long)j * ldy + r] = acc[j];
	}
}

int emv_best_impl(void) {
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx2") &&
	    __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
		return EMV_AVX512VNNI;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
		return EMV_AVX2;
	return EMV_SCALAR;
}
#else
int emv_best_impl(void) { return EMV_SCALAR; }
#endif

int emv_mul_q8_0(int impl, const void *w, long ws, int nb, int r0, int r1,
                 const emv_xblock *xq, int n, float *y, long ldy) {
	if (n < 1 || n > EMV_MAXN || impl > emv_best_impl()) return -1;
#if defined(__x86_64__)
	if (impl == EMV_AVX512VNNI) { q8_vnni(w, ws, nb, r0, r1, xq, n, y, ldy); return 0; }
	if (impl == EMV_AVX2) { q8_avx2(w, ws, nb, r0, r1, xq, n, y, ldy); return 0; }
#endif
	q8_scalar(w, ws, nb, r0, r1, xq, n, y, ldy);
	return 0;
}

int emv_mul_q4_0(int impl, const void *w, long ws, int nb, int r0, int r1,
                 const emv_xblock *xq, int n, float *y, long ldy) {
	if (n < 1 || n > EMV_MAXN || impl > emv_best_impl()) return -1;
#if defined(__x86_64__)
	if (impl == EMV_AVX512VNNI) { q4_vnni(w, ws, nb, r0, r1, xq, n, y, ldy); return 0; }
	if (impl == EMV_AVX2) { q4_avx2(w, ws, nb, r0, r1, xq, n, y, ldy); return 0; }
#endif
	q4_scalar(w, ws, nb, r0, r1, xq, n, y, ldy);
	return 0;
}
