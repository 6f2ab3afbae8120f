// edgellm's interleaved Q4_0 layout (q4x4) and its AVX-512 VNNI kernel;
// see matvec_q4x4.h for the layout and matvec.c / doc.go for the contract.
// Per contract lane l of row r, block b:
//   lane = vpdpbusd(-8*lanesum_l(a), nibbles, a)   (exact int32)
//   acc  = fma((float)lane, f32(d_w)*f32(d_a), acc)
// with lanes 0..3 (low nibbles) in one accumulator and 4..7 (high nibbles)
// in another, then y = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) as the
// plain-block kernels sum: bitwise their result, so a graph may mix the two.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "matvec_q4x4.h"
#include "emv_scratch.h"
#include "emv_prefetch.h"
#include "emv_split.h"
#include "matvec_q4x4_avx2.h"
#include "matvec_q4x4_gemm.h" // n > 8: the tiled kernel

#include <stdlib.h>
#include <string.h>

#define Q4X4_QK 32
#define Q4X4_Q4_BYTES 18
#define Q4X4_Q8_BYTES 34

size_t emv_q4x4_group_bytes(int64_t k) {
	size_t nb = (size_t)(k / Q4X4_QK);
	return (nb * 72 + 63) & ~(size_t)63;
}

size_t emv_q4x4_size(int64_t rows, int64_t k) {
	if (rows <= 0 || k <= 0 || k % Q4X4_QK != 0) return 0;
	return (size_t)((rows + 3) / 4) * emv_q4x4_group_bytes(k);
}

int emv_q4x4_pack(const void *w, size_t ws, int64_t rows, int64_t k, int64_t g0, int64_t g1, void *dst) {
	if (rows <= 0 || k <= 0 || k % Q4X4_QK != 0 || g0 < 0 || g1 < g0 || g1 > (rows + 3) / 4) return -1;
	int nb = (int)(k / Q4X4_QK);
	size_t gbytes = emv_q4x4_group_bytes(k);
	for (int64_t g = g0; g < g1; g++) {
		uint8_t *gp = (uint8_t *)dst + (size_t)g * gbytes;
		memset(gp, 0, gbytes);
		for (int i = 0; i < 4; i++) {
			int64_t r = 4 * g + i;
			if (r >= rows) break;
			const uint8_t *wr = (const uint8_t *)w + (size_t)r * ws;
			for (int b = 0; b < nb; b++) {
				const uint8_t *blk = wr + (size_t)b * Q4X4_Q4_BYTES;
				memcpy(gp + (size_t)nb * 64 + (size_t)b * 8 + 2 * i, blk, 2);
				memcpy(gp + (size_t)b * 64 + 16 * i, blk + 2, 16);
			}
		}
	}
	return 0;
}

#if defined(__x86_64__)
#include <immintrin.h>

#include "q4x4_avx512.h"

#define Q4X4_T Q4X4_AVX512_T
#define Q4X4_INLINE Q4X4_AVX512_INLINE

int emv_q4x4_available(void) {
	static int ok = -1; // racy but idempotent
	if (ok < 0) {
		__builtin_cpu_init();
		ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
		     __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
		     __builtin_cpu_supports("avx512vnni");
	}
	return ok;
}

// From Q4X4_SIGNED_N activation rows on, q4x4_body_s: the weights are made
// signed (nib - 8) and the activations unsigned (a + 128, kept in the
// scratch), so per block and group one vpdpbusd of the unsigned nibbles by
// -128 (from 4096) gives -128*sum(nib - 8) per lane, the start of every
// row's vpdpbusd: the same exact int32 lane sum(a*(nib - 8)) (|partial| <
// 2^14), without the two lanesum broadcasts per block and row.
#define Q4X4_SIGNED_N 5

// Per call and thread, for block b and activation row j (index b*n + j):
// the int32 -8*lanesum of the 8 contract lanes (32 bytes; for n >=
// Q4X4_SIGNED_N the 32 quants + 128 instead) and the f32 activation scale
// da[b*n + j]. The activations themselves are read from
// their Q8_0 blocks (a 16-byte broadcast per half block).
Q4X4_T static void q4x4_prep(int nb, const uint8_t *a, size_t as, int n, float *da, uint8_t *scr) {
	const __m256i ones = _mm256_set1_epi8(1);
	const __m256i flip = _mm256_set1_epi8((char)0x80);
	for (int b = 0; b < nb; b++) {
		for (int j = 0; j < n; j++) {
			const uint8_t *ab = a + (size_t)j * as + (size_t)b * Q4X4_Q8_BYTES;
			uint16_t h;
			memcpy(&h, ab, 2);
			da[(size_t)b * n + j] = _cvtsh_ss(h);
			__m256i av = _mm256_loadu_si256((const __m256i *)(ab + 2));
			if (n >= Q4X4_SIGNED_N) {
				_mm256_store_si256((__m256i *)(scr + ((size_t)b * n + j) * 32), _mm256_xor_si256(av, flip));
				continue;
			}
			__m256i ls = _mm256_sub_epi32(_mm256_setzero_si256(),
			                              _mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, av), 3));
			_mm256_store_si256((__m256i *)(scr + ((size_t)b * n + j) * 32), ls);
		}
	}
}

// Groups [g, g+G) for N activation rows: the nibbles of each group and
// block are loaded once, the activation parts once per block for all G.
// Chunk L (128 bits) of a vector is row 4g+L: int32 lanes 0..3 are its
// contract lanes 0..3 (low nibbles) in lo, 4..7 (high nibbles) in hi.
Q4X4_T Q4X4_INLINE void q4x4_body(const uint8_t *p, size_t gbytes, int nb, int64_t g, int G, int64_t g1, int N,
                                 const uint8_t *a, size_t as, const uint8_t *scr, const float *da, float *y,
                                 size_t ldy, int64_t r0, int64_t r1) {
	// While this pass reads groups [g, g+G), the next pass's are prefetched.
	emv_pf pf = emv_pf_init(p + (size_t)(g + G) * gbytes, (size_t)G * gbytes, p + (size_t)g1 * gbytes, nb);
	__m512 lo[4][8], hi[4][8];
	for (int gi = 0; gi < G; gi++)
		for (int j = 0; j < N; j++) lo[gi][j] = hi[gi][j] = _mm512_setzero_ps();
	const uint8_t *gp0 = p + (size_t)g * gbytes;
	for (int b = 0; b < nb; b++) {
		__m512i qlo[4], qhi[4];
		__m512 dw[4];
		emv_pf_step(&pf, b);
		for (int gi = 0; gi < G; gi++) q4x4_group_block(gp0 + (size_t)gi * gbytes, nb, b, &qlo[gi], &qhi[gi], &dw[gi]);
		for (int j = 0; j < N; j++) {
			const uint8_t *ab = a + (size_t)j * as + (size_t)b * Q4X4_Q8_BYTES + 2;
			const uint8_t *s = scr + ((size_t)b * N + j) * 32;
			__m512i alo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ab));
			__m512i ahi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(ab + 16)));
			__m512i xlo = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)s));
			__m512i xhi = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(s + 16)));
			__m512 daj = _mm512_set1_ps(da[(size_t)b * N + j]);
			for (int gi = 0; gi < G; gi++) {
				__m512 sc = _mm512_mul_ps(dw[gi], daj);
				lo[gi][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(xlo, qlo[gi], alo)), sc, lo[gi][j]);
				hi[gi][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(xhi, qhi[gi], ahi)), sc, hi[gi][j]);
			}
		}
	}
	for (int gi = 0; gi < G; gi++)
		for (int j = 0; j < N; j++) q4x4_store4(lo[gi][j], hi[gi][j], 4 * (g + gi), r0, r1, y + (size_t)j * ldy);
}

// q4x4_body for N >= Q4X4_SIGNED_N: see above; per group and block the
// signed nibbles and the rows' vpdpbusd start, then each activation row's
// half blocks loaded once for all G groups.
Q4X4_T Q4X4_INLINE void q4x4_body_s(const uint8_t *p, size_t gbytes, int nb, int64_t g, int G, int64_t g1, int N,
                                   const uint8_t *scr, const float *da, float *y, size_t ldy, int64_t r0, int64_t r1) {
	emv_pf pf = emv_pf_init(p + (size_t)(g + G) * gbytes, (size_t)G * gbytes, p + (size_t)g1 * gbytes, nb);
	const __m512i eight = _mm512_set1_epi8(8);
	const __m512i m128 = _mm512_set1_epi8((char)0x80);
	const __m512i c4096 = _mm512_set1_epi32(4096);
	__m512 lo[4][8], hi[4][8];
	for (int gi = 0; gi < G; gi++)
		for (int j = 0; j < N; j++) lo[gi][j] = hi[gi][j] = _mm512_setzero_ps();
	const uint8_t *gp0 = p + (size_t)g * gbytes;
	for (int b = 0; b < nb; b++) {
		__m512i clo[4], chi[4], slo[4], shi[4];
		__m512 dw[4];
		emv_pf_step(&pf, b);
		for (int gi = 0; gi < G; gi++) {
			__m512i ulo, uhi;
			q4x4_group_block(gp0 + (size_t)gi * gbytes, nb, b, &ulo, &uhi, &dw[gi]);
			clo[gi] = _mm512_dpbusd_epi32(c4096, ulo, m128), chi[gi] = _mm512_dpbusd_epi32(c4096, uhi, m128);
			slo[gi] = _mm512_sub_epi8(ulo, eight), shi[gi] = _mm512_sub_epi8(uhi, eight);
		}
		for (int j = 0; j < N; j++) {
			const uint8_t *s = scr + ((size_t)b * N + j) * 32;
			__m512i alo = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)s));
			__m512i ahi = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(s + 16)));
			__m512 daj = _mm512_set1_ps(da[(size_t)b * N + j]);
			for (int gi = 0; gi < G; gi++) {
				__m512 sc = _mm512_mul_ps(dw[gi], daj);
				lo[gi][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(clo[gi], alo, slo[gi])), sc, lo[gi][j]);
				hi[gi][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(chi[gi], ahi, shi[gi])), sc, hi[gi][j]);
			}
		}
	}
	for (int gi = 0; gi < G; gi++)
		for (int j = 0; j < N; j++) q4x4_store4(lo[gi][j], hi[gi][j], 4 * (g + gi), r0, r1, y + (size_t)j * ldy);
}

typedef void (*q4x4_fn)(const uint8_t *, size_t, int, int64_t, int64_t, int64_t, const uint8_t *, size_t, const uint8_t *,
                        const float *, float *, size_t, int64_t, int64_t);

// One function per n: GN groups per pass (more independent chains, and
// each activation row's loads serve GN groups), then single groups. GN =
// 3 from n = 2 on: from n = 4 the accumulators no longer all fit in the
// 32 zmm registers (3 x 2 x N) and some live on the stack, yet it
// measured faster than GN = 2 and GN = 1 (RATIONALE "Bending v(n)").
#define Q4X4_FN(N, GN)                                                                                          \
	Q4X4_T static void q4x4_n##N(const uint8_t *p, size_t gbytes, int nb, int64_t g0, int64_t g1, int64_t gpf, \
	                             const uint8_t *a, size_t as, const uint8_t *scr, const float *da, float *y,   \
	                             size_t ldy, int64_t r0, int64_t r1) {                                       \
		int64_t g = g0;                                                                                     \
		for (; g + GN <= g1; g += GN) q4x4_body(p, gbytes, nb, g, GN, gpf, N, a, as, scr, da, y, ldy, r0, r1);       \
		for (; g < g1; g++) q4x4_body(p, gbytes, nb, g, 1, gpf, N, a, as, scr, da, y, ldy, r0, r1);                  \
	}
Q4X4_FN(1, 4)
Q4X4_FN(2, 3)
Q4X4_FN(3, 3)
Q4X4_FN(4, 3)
#define Q4X4_FN_S(N, GN)                                                                                        \
	Q4X4_T static void q4x4_n##N(const uint8_t *p, size_t gbytes, int nb, int64_t g0, int64_t g1, int64_t gpf, \
	                             const uint8_t *a, size_t as, const uint8_t *scr, const float *da, float *y,   \
	                             size_t ldy, int64_t r0, int64_t r1) {                                       \
		(void)a, (void)as;                                                                                  \
		int64_t g = g0;                                                                                     \
		for (; g + GN <= g1; g += GN) q4x4_body_s(p, gbytes, nb, g, GN, gpf, N, scr, da, y, ldy, r0, r1);            \
		for (; g < g1; g++) q4x4_body_s(p, gbytes, nb, g, 1, gpf, N, scr, da, y, ldy, r0, r1);                       \
	}
Q4X4_FN_S(5, 3)
Q4X4_FN_S(6, 3)
Q4X4_FN_S(7, 3)
Q4X4_FN_S(8, 3)
static const q4x4_fn q4x4_tab[8] = {q4x4_n1, q4x4_n2, q4x4_n3, q4x4_n4, q4x4_n5, q4x4_n6, q4x4_n7, q4x4_n8};


int emv_q4x4_matvec(const void *p, int64_t rows, int64_t k, int64_t r0, int64_t r1, const void *a, size_t as,
                    int64_t n, float *y, size_t ldy) {
	if (rows <= 0 || k <= 0 || k % Q4X4_QK != 0 || n < 1 || r0 < 0 || r1 < r0 || r1 > rows) return -1;
	if (emv_q4x4_avx2_selected()) return emv_q4x4_matvec_avx2(p, rows, k, r0, r1, a, as, n, y, ldy);
	if (n > 8 && emv_q4x4_gemm(p, rows, k, r0, r1, a, as, n, y, ldy) == 0) return 0; // else 8 rows at a time
	if (!emv_q4x4_available()) return -2;
	if (r0 == r1) return 0;
	int nb = (int)(k / Q4X4_QK);
	size_t gbytes = emv_q4x4_group_bytes(k);
	int64_t g0 = r0 / 4, g1 = (r1 + 3) / 4;
	// Scratch for the largest chunk of rows: MaxN * nb * (32 + 4) bytes.
	uint8_t *scr = emv_scratch_get(EMV_SCRATCH_Q4X4, (size_t)(n < 8 ? n : 8) * nb * 36 + 64);
	if (!scr) return -2;
	for (int64_t j0 = 0; j0 < n; j0 += 8) {
		int nn = (int)(n - j0 < 8 ? n - j0 : 8);
		const uint8_t *aj = (const uint8_t *)a + (size_t)j0 * as;
		float *da = (float *)(scr + (size_t)nn * nb * 32);
		q4x4_prep(nb, aj, as, nn, da, scr);
		q4x4_tab[nn - 1]((const uint8_t *)p, gbytes, nb, g0, g1, g1, aj, as, scr, da, y + (size_t)j0 * ldy, ldy, r0,
		                 r1);
	}
	return 0;
}

// Units of 16 rows (4 groups) per claimed chunk: about 64 KB of weights, a
// multiple of 3 units from n = 2 on (whole 3-group passes).
static int64_t q4x4_chunk_units(int64_t k, int64_t n) {
	int64_t u = (int64_t)(65536 / (4 * emv_q4x4_group_bytes(k)));
	if (u < 1) u = 1;
	if (n >= 2) u = (u + 2) / 3 * 3;
	return u;
}

int emv_q4x4_matvec_split(const void *p, int64_t rows, int64_t k, const void *a, size_t as, int64_t n, float *y,
                          size_t ldy, void *split, int ith, int nth) {
	if (rows <= 0 || k <= 0 || k % Q4X4_QK != 0 || n < 1 || !split || ith < 0 || ith >= nth) return -1;
	if (n > 8 || nth > EMV_SPLIT_MAX || emv_q4x4_avx2_selected() || !emv_q4x4_available()) return -2;
	int nb = (int)(k / Q4X4_QK);
	size_t gbytes = emv_q4x4_group_bytes(k);
	emv_split *sp = split;
	int64_t units = (rows + 15) / 16, chunk = q4x4_chunk_units(k, n), u0, u1, pf1;
	emv_split_begin(sp, nth, units);
	// Without scratch this thread claims nothing: the others take its share
	// (every thread of the call must pass begin and end).
	uint8_t *scr = emv_scratch_get(EMV_SCRATCH_Q4X4, (size_t)n * nb * 36 + 64);
	if (!scr) {
		emv_split_end(sp, nth);
		return 0;
	}
	float *da = (float *)(scr + (size_t)n * nb * 32);
	q4x4_prep(nb, (const uint8_t *)a, as, (int)n, da, scr);
	int64_t done = 0;
	while (emv_split_next(sp, ith, nth, chunk, &u0, &u1, &pf1)) {
		done += u1 - u0;
		int64_t r0 = 16 * u0, r1 = 16 * u1 < rows ? 16 * u1 : rows, rpf = 16 * pf1 < rows ? 16 * pf1 : rows;
		q4x4_tab[n - 1]((const uint8_t *)p, gbytes, nb, r0 / 4, (r1 + 3) / 4, (rpf + 3) / 4, (const uint8_t *)a, as,
		                scr, da, y, ldy, r0, r1);
	}
	emv_split_end(sp, nth);
	return done;
}
#else
int emv_q4x4_available(void) { return 0; }

int emv_q4x4_matvec(const void *p, int64_t rows, int64_t k, int64_t r0, int64_t r1, const void *a, size_t as,
                    int64_t n, float *y, size_t ldy) {
	(void)p, (void)a, (void)as, (void)y, (void)ldy;
	if (rows <= 0 || k <= 0 || k % Q4X4_QK != 0 || n < 1 || r0 < 0 || r1 < r0 || r1 > rows) return -1;
	return -2;
}

int emv_q4x4_matvec_split(const void *p, int64_t rows, int64_t k, const void *a, size_t as, int64_t n, float *y,
                          size_t ldy, void *split, int ith, int nth) {
	(void)p, (void)rows, (void)k, (void)a, (void)as, (void)n, (void)y, (void)ldy, (void)split, (void)ith, (void)nth;
	return -2;
}
#endif
