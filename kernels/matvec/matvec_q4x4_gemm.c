// The q4x4 kernel for many activation rows (prefill, n > 8): the same
// per-output arithmetic as emv_q4x4_matvec (matvec_q4x4.c), tiled for
// cache reuse instead of one pass over the weights per 8 rows.
//
// Per contract lane l of weight row r, activation row j, block b in
// increasing order:
//   lane = vpdpbusd(-8*lanesum_l(a_jb), nibbles_rb, a_jb)   (exact int32)
//   acc  = fma((float)lane, f32(d_w)*f32(d_a), acc)
// lanes 0..3 (low nibbles) in lo, 4..7 in hi, then
// y = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)): the plain-block kernels' and
// the n <= 8 q4x4 kernel's bits, whatever the tiling (TestQ4x4GemmBitwise).
//
// Tiling: activation rows in tiles that fit in L2 (their Q8_0 blocks plus
// the prepared lanesums and scales, ~70 bytes per 32 elements); per tile,
// weight groups two at a time (8 rows; their nibbles and scales stay in L1
// while every row of the tile passes over them), 4 activation rows per
// register block: 2 groups x 4 rows x lo/hi = 16 zmm accumulators. The
// weights are read from memory once per activation tile, not once per 8
// rows.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "matvec_q4x4_gemm.h"
#include "emv_scratch.h"
#include "emv_prefetch.h"

#include "matvec_q4x4.h"

#include <stdlib.h>
#include <string.h>

#define QG_QK 32
#define QG_Q8_BYTES 34
// Activation tile budget in bytes (Q8_0 blocks + 36 bytes of prepared
// lanesums and scale per block and row).
#define QG_TILE_BYTES (512 * 1024)

#if defined(__x86_64__)
#include <immintrin.h>

#include "q4x4_avx512.h"

#define QG_T Q4X4_AVX512_T
#define QG_INLINE Q4X4_AVX512_INLINE

// qg_available: this CPU has the instructions of this file's kernel
// (AVX-512 VNNI; the AVX2 q4x4 kernel may be usable where this one is not).
static int qg_available(void) { return emv_q4x4_available(); }

// Prepare activation rows [0, n) of a tile: for row j and block b (index
// j*nb + b), the int32 -8*lanesum of the 8 contract lanes (32 bytes) in
// ls and the f32 activation scale in da.
QG_T static void qg_prep(int nb, const uint8_t *a, size_t as, int n, float *da, uint8_t *ls) {
	const __m256i ones = _mm256_set1_epi8(1);
	for (int j = 0; j < n; j++) {
		for (int b = 0; b < nb; b++) {
			const uint8_t *ab = a + (size_t)j * as + (size_t)b * QG_Q8_BYTES;
			uint16_t h;
			memcpy(&h, ab, 2);
			da[(size_t)j * nb + b] = _cvtsh_ss(h);
			__m256i av = _mm256_loadu_si256((const __m256i *)(ab + 2));
			__m256i s = _mm256_sub_epi32(_mm256_setzero_si256(),
			                             _mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, av), 3));
			_mm256_store_si256((__m256i *)(ls + ((size_t)j * nb + b) * 32), s);
		}
	}
}

// G groups from g (G <= 2) times N activation rows (N <= 4) starting at
// tile row j0: the register block. The first register block of a tile
// over groups g.. (j0 = 0) is the one that streams them from memory: it
// prefetches the next G groups (up to the thread's last, pflim) into L2;
// the other blocks re-read groups already in L1 and pass pflim = NULL.
QG_T QG_INLINE void qg_body(const uint8_t *p, size_t gbytes, int nb, int64_t g, int G, int N, const uint8_t *a,
                            size_t as, const uint8_t *ls, const float *da, int j0, float *y, size_t ldy, int64_t r0,
                            int64_t r1, const uint8_t *pflim) {
	emv_pf pf = emv_pf_init(p + (size_t)(g + G) * gbytes, (size_t)G * gbytes, pflim, nb);
	__m512 lo[2][4], hi[2][4];
	for (int gi = 0; gi < G; gi++)
		for (int j = 0; j < N; j++) lo[gi][j] = hi[gi][j] = _mm512_setzero_ps();
	const uint8_t *gp0 = p + (size_t)g * gbytes;
	for (int b = 0; b < nb; b++) {
		__m512i qlo[2], qhi[2];
		__m512 dw[2];
		emv_pf_step(&pf, b);
		for (int gi = 0; gi < G; gi++) q4x4_group_block(gp0 + (size_t)gi * gbytes, nb, b, &qlo[gi], &qhi[gi], &dw[gi]);
		for (int j = 0; j < N; j++) {
			size_t jb = (size_t)(j0 + j) * nb + b;
			const uint8_t *ab = a + (size_t)(j0 + j) * as + (size_t)b * QG_Q8_BYTES + 2;
			const uint8_t *s = ls + jb * 32;
			__m512i alo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ab));
			__m512i ahi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(ab + 16)));
			__m512i xlo = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)s));
			__m512i xhi = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(s + 16)));
			__m512 daj = _mm512_set1_ps(da[jb]);
			for (int gi = 0; gi < G; gi++) {
				__m512 sc = _mm512_mul_ps(dw[gi], daj);
				lo[gi][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(xlo, qlo[gi], alo)), sc, lo[gi][j]);
				hi[gi][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(xhi, qhi[gi], ahi)), sc, hi[gi][j]);
			}
		}
	}
	for (int gi = 0; gi < G; gi++)
		for (int j = 0; j < N; j++)
			q4x4_store4(lo[gi][j], hi[gi][j], 4 * (g + gi), r0, r1, y + (size_t)(j0 + j) * ldy);
}

typedef void (*qg_fn)(const uint8_t *, size_t, int, int64_t, const uint8_t *, size_t, const uint8_t *, const float *,
                      int, float *, size_t, int64_t, int64_t, const uint8_t *);

#define QG_FN(G, N)                                                                                              \
	QG_T static void qg_g##G##n##N(const uint8_t *p, size_t gbytes, int nb, int64_t g, const uint8_t *a,          \
	                               size_t as, const uint8_t *ls, const float *da, int j0, float *y, size_t ldy,   \
	                               int64_t r0, int64_t r1, const uint8_t *pflim) {                               \
		qg_body(p, gbytes, nb, g, G, N, a, as, ls, da, j0, y, ldy, r0, r1, pflim);                               \
	}
QG_FN(1, 1)
QG_FN(1, 2)
QG_FN(1, 3)
QG_FN(1, 4)
QG_FN(2, 1)
QG_FN(2, 2)
QG_FN(2, 3)
QG_FN(2, 4)
static const qg_fn qg_tab[2][4] = {{qg_g1n1, qg_g1n2, qg_g1n3, qg_g1n4}, {qg_g2n1, qg_g2n2, qg_g2n3, qg_g2n4}};


int emv_q4x4_gemm(const void *p, int64_t rows, int64_t k, int64_t r0, int64_t r1, const void *a, size_t as,
                  int64_t n, float *y, size_t ldy) {
	if (rows <= 0 || k <= 0 || k % QG_QK != 0 || n < 1 || r0 < 0 || r1 < r0 || r1 > rows) return -1;
	if (!qg_available()) return -2;
	if (r0 == r1) return 0;
	int nb = (int)(k / QG_QK);
	size_t gbytes = emv_q4x4_group_bytes(k);
	int64_t g0 = r0 / 4, g1 = (r1 + 3) / 4;
	size_t rowb = (size_t)nb * (QG_Q8_BYTES + 36);
	int64_t jt = (int64_t)(QG_TILE_BYTES / rowb) & ~(int64_t)3;
	if (jt < 4) jt = 4;
	if (jt > n) jt = n;
	uint8_t *ls = emv_scratch_get(EMV_SCRATCH_Q4X4_GEMM, (size_t)jt * nb * 36 + 64);
	if (!ls) return -2;
	float *da = (float *)(ls + (size_t)jt * nb * 32);
	for (int64_t t0 = 0; t0 < n; t0 += jt) {
		int nt = (int)(n - t0 < jt ? n - t0 : jt);
		const uint8_t *at = (const uint8_t *)a + (size_t)t0 * as;
		float *yt = y + (size_t)t0 * ldy;
		qg_prep(nb, at, as, nt, da, ls);
		const uint8_t *lim = (const uint8_t *)p + (size_t)g1 * gbytes;
		for (int64_t g = g0; g < g1; g += 2) {
			int G = g + 2 <= g1 ? 2 : 1;
			int j = 0;
			for (; j + 4 <= nt; j += 4)
				qg_tab[G - 1][3]((const uint8_t *)p, gbytes, nb, g, at, as, ls, da, j, yt, ldy, r0, r1, j ? NULL : lim);
			if (j < nt)
				qg_tab[G - 1][nt - j - 1]((const uint8_t *)p, gbytes, nb, g, at, as, ls, da, j, yt, ldy, r0, r1,
				                          j ? NULL : lim);
		}
	}
	return 0;
}
#else
int emv_q4x4_gemm(const void *p, int64_t rows, int64_t k, int64_t r0, int64_t r1, const void *a, size_t as,
                  int64_t n, float *y, size_t ldy) {
	(void)p, (void)a, (void)as, (void)y, (void)ldy;
	if (rows <= 0 || k <= 0 || k % QG_QK != 0 || n < 1 || r0 < 0 || r1 < r0 || r1 > rows) return -1;
	return -2;
}
#endif
