// The q4x4 kernel for AVX2 (+FMA, F16C) CPUs: the layout of matvec_q4x4.h,
// the contract of matvec.c / doc.go. Per weight row r, activation row j,
// block b, one ymm holds the row's 8 contract lanes:
//   q    = [low nibbles | high nibbles]        (a 128-bit broadcast load,
//          shifted by 0 / 4 per half and masked: no shuffle port)
//   lane = madd(maddubs(q, a), 1) - 8*lanesum(a)   (exact int32: the u8 x s8
//          pairs are at most 15*128*2 < 2^15, so maddubs never saturates;
//          with AVX-VNNI, chosen at run time: vpdpbusd(-8*lanesum(a), q, a),
//          the same integers)
//   acc  = fma((float)lane, f32(d_w)*f32(d_a), acc)
// then y = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)): bitwise the plain-block
// kernels and the AVX-512 q4x4 kernel. R rows of a group share each loaded
// activation block (R*N accumulators fit the 16 ymm registers); each
// group's nibbles are read from memory once, the other R-passes over the
// same group hit L1/L2.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "matvec_q4x4_avx2.h"
#include "emv_scratch.h"
#include "emv_prefetch.h"
#include "matvec_q4x4.h"

#include <stdlib.h>
#include <string.h>

#define Q4A_QK 32
#define Q4A_Q8_BYTES 34

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

#define Q4A_T __attribute__((target("avx2,fma,f16c")))
#define Q4A_T_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#define Q4A_INLINE static inline __attribute__((always_inline))

static int q4a_forced; // 0: run-time choice; 1: AVX2 (maddubs); 2: AVX2 with AVX-VNNI

void emv_q4x4_force_avx2(int mode) { q4a_forced = mode == 1 || mode == 2 ? mode : 0; }

int emv_q4x4_avxvnni_available(void) {
	static int ok = -1; // racy but idempotent
	if (ok < 0) {
		unsigned a, b, c, d;
		ok = 0;
		// CPUID leaf 7 subleaf 1: EAX bit 4 is AVX-VNNI.
		if (emv_q4x4_avx2_available() && __get_cpuid_max(0, 0) >= 7) {
			__cpuid_count(7, 1, a, b, c, d);
			ok = (a >> 4) & 1;
		}
	}
	return ok;
}

int emv_q4x4_avx2_available(void) {
	static int ok = -1; // racy but idempotent
	if (ok < 0) {
		__builtin_cpu_init();
		ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
	}
	return ok;
}

int emv_q4x4_usable(void) { return emv_q4x4_available() || emv_q4x4_avx2_available(); }

int emv_q4x4_avx2_selected(void) {
	return emv_q4x4_avx2_available() && (q4a_forced || !emv_q4x4_available());
}

// Per block b and activation row j (index b*n + j): the 8 int32
// -8*lanesum(a) (32 bytes of scr) and the f32 activation scale da.
Q4A_T static void q4a_prep(int nb, const uint8_t *a, size_t as, int n, float *da, uint8_t *scr) {
	const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	for (int b = 0; b < nb; b++) {
		for (int j = 0; j < n; j++) {
			const uint8_t *ab = a + (size_t)j * as + (size_t)b * Q4A_Q8_BYTES;
			uint16_t h;
			memcpy(&h, ab, 2);
			da[(size_t)b * n + j] = _cvtsh_ss(h);
			__m256i av = _mm256_loadu_si256((const __m256i *)(ab + 2));
			__m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, av), ones16);
			_mm256_store_si256((__m256i *)(scr + ((size_t)b * n + j) * 32),
			                   _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(s, 3)));
		}
	}
}

// The fixed tree: v_l = acc_l + acc_{l+4}; (v0+v2) + (v1+v3).
Q4A_T Q4A_INLINE float q4a_hsum(__m256 acc) {
	__m128 v = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
	v = _mm_add_ps(v, _mm_movehl_ps(v, v));
	v = _mm_add_ss(v, _mm_movehdup_ps(v));
	return _mm_cvtss_f32(v);
}

// Rows i0..i0+R-1 of group gp (first row index rb), N activation rows.
// The pass with i0 = 0 streams the group from memory (the others hit L1):
// it prefetches the next group into L2, up to pflim (NULL: none).
// Q4A_LANE is the exact int32 lane of row i (q[i]) and activation av:
// maddubs + madd, or AVX-VNNI's vpdpbusd (the same integers).
#define Q4A_LANE_AVX2 _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(q[i], av), ones), x)
#define Q4A_LANE_VNNI _mm256_dpbusd_avx_epi32(x, q[i], av)
#define Q4A_BODY(SUF, TARGET, LANE)                                                                              \
	TARGET Q4A_INLINE void q4a_body_##SUF(const uint8_t *gp, size_t gbytes, int nb, int i0, int R, int N,        \
	                                      const uint8_t *a, size_t as, const uint8_t *scr, const float *da,      \
	                                      float *y, size_t ldy, int64_t rb, int64_t r0, int64_t r1,              \
	                                      const uint8_t *pflim) {                                                \
		emv_pf pf = emv_pf_init(gp + gbytes, gbytes, i0 ? NULL : pflim, nb);                                    \
		const __m256i m = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);                                  \
		const __m256i sh = _mm256_set_epi64x(4, 4, 0, 0);                                                       \
		(void)ones;                                                                                             \
		__m256 acc[4][8];                                                                                       \
		for (int i = 0; i < R; i++)                                                                             \
			for (int j = 0; j < N; j++) acc[i][j] = _mm256_setzero_ps();                                        \
		for (int b = 0; b < nb; b++) {                                                                          \
			__m256i q[4];                                                                                       \
			__m256 dw[4];                                                                                       \
			emv_pf_step(&pf, b);                                                                                \
			for (int i = 0; i < R; i++) {                                                                       \
				__m256i v = _mm256_broadcastsi128_si256(                                                        \
				    _mm_loadu_si128((const __m128i *)(gp + (size_t)b * 64 + 16 * (i0 + i))));                   \
				q[i] = _mm256_and_si256(_mm256_srlv_epi64(v, sh), m);                                           \
				uint16_t h;                                                                                     \
				memcpy(&h, gp + (size_t)nb * 64 + (size_t)b * 8 + 2 * (i0 + i), 2);                             \
				dw[i] = _mm256_set1_ps(_cvtsh_ss(h));                                                           \
			}                                                                                                   \
			for (int j = 0; j < N; j++) {                                                                       \
				__m256i av = _mm256_loadu_si256((const __m256i *)(a + (size_t)j * as + (size_t)b * Q4A_Q8_BYTES + 2)); \
				__m256i x = _mm256_load_si256((const __m256i *)(scr + ((size_t)b * N + j) * 32));               \
				__m256 daj = _mm256_set1_ps(da[(size_t)b * N + j]);                                             \
				for (int i = 0; i < R; i++) {                                                                   \
					__m256i lane = LANE;                                                                        \
					acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane), _mm256_mul_ps(dw[i], daj), acc[i][j]); \
				}                                                                                               \
			}                                                                                                   \
		}                                                                                                       \
		for (int i = 0; i < R; i++) {                                                                           \
			if (rb + i < r0 || rb + i >= r1) continue;                                                          \
			for (int j = 0; j < N; j++) y[(size_t)j * ldy + rb + i] = q4a_hsum(acc[i][j]);                      \
		}                                                                                                       \
	}

typedef void (*q4a_fn)(const uint8_t *, size_t, int, const uint8_t *, size_t, const uint8_t *, const float *,
                       float *, size_t, int64_t, int64_t, const uint8_t *);

// One function per n: R rows of a group per pass (R*N <= 8 accumulators).
#define Q4A_FN(SUF, TARGET, N, R)                                                                           \
	TARGET static void q4a_n##N##_##SUF(const uint8_t *p, size_t gbytes, int nb, const uint8_t *a, size_t as,  \
	                                    const uint8_t *scr, const float *da, float *y, size_t ldy, int64_t r0, \
	                                    int64_t r1, const uint8_t *pflim) {                                    \
		for (int64_t g = r0 / 4; g < (r1 + 3) / 4; g++) {                                                   \
			const uint8_t *gp = p + (size_t)g * gbytes;                                                     \
			for (int i0 = 0; i0 < 4; i0 += R) {                                                             \
				int64_t rb = 4 * g + i0;                                                                    \
				if (rb + R > r0 && rb < r1)                                                                 \
					q4a_body_##SUF(gp, gbytes, nb, i0, R, N, a, as, scr, da, y, ldy, rb, r0, r1, pflim);    \
			}                                                                                               \
		}                                                                                                   \
	}
#define Q4A_KERNEL(SUF, TARGET, LANE)                                                                       \
	Q4A_BODY(SUF, TARGET, LANE)                                                                             \
	Q4A_FN(SUF, TARGET, 1, 4)                                                                               \
	Q4A_FN(SUF, TARGET, 2, 4)                                                                               \
	Q4A_FN(SUF, TARGET, 3, 2)                                                                               \
	Q4A_FN(SUF, TARGET, 4, 2)                                                                               \
	Q4A_FN(SUF, TARGET, 5, 1)                                                                               \
	Q4A_FN(SUF, TARGET, 6, 1)                                                                               \
	Q4A_FN(SUF, TARGET, 7, 1)                                                                               \
	Q4A_FN(SUF, TARGET, 8, 1)                                                                               \
	static const q4a_fn q4a_tab_##SUF[8] = {q4a_n1_##SUF, q4a_n2_##SUF, q4a_n3_##SUF, q4a_n4_##SUF,         \
	                                        q4a_n5_##SUF, q4a_n6_##SUF, q4a_n7_##SUF, q4a_n8_##SUF};
Q4A_KERNEL(avx2, Q4A_T, Q4A_LANE_AVX2)
Q4A_KERNEL(vnni, Q4A_T_VNNI, Q4A_LANE_VNNI)


// Above 8 activation rows the rows go in tiles of Q4A_TILE_BYTES of
// prepared activations (Q8_0 blocks, lanesums, scales: they stay in L2),
// and each tile walks the matrix Q4A_GROUPS groups at a time, every 8-row
// chunk of the tile over them: the weights are read from memory once per
// tile, not once per 8 rows. Each output still runs the n <= 8 kernel's
// arithmetic, so it is bitwise the 1-row call.
#define Q4A_TILE_BYTES (512 << 10)
#define Q4A_GROUPS 4

int emv_q4x4_matvec_avx2(const void *p, int64_t rows, int64_t k, int64_t r0, int64_t r1, const void *a, size_t as,
                         int64_t n, float *y, size_t ldy) {
	if (rows <= 0 || k <= 0 || k % Q4A_QK != 0 || n < 1 || r0 < 0 || r1 < r0 || r1 > rows) return -1;
	if (!emv_q4x4_avx2_available()) return -2;
	if (r0 == r1) return 0;
	int nb = (int)(k / Q4A_QK);
	size_t gbytes = emv_q4x4_group_bytes(k);
	int64_t tile = (int64_t)(Q4A_TILE_BYTES / ((size_t)nb * (36 + Q4A_Q8_BYTES))) & ~(int64_t)7;
	if (tile < 8) tile = 8;
	if (tile > n) tile = n;
	uint8_t *scr = emv_scratch_get(EMV_SCRATCH_Q4X4_AVX2, (size_t)tile * nb * 36 + 64);
	if (!scr) return -2;
	int vnni = q4a_forced ? q4a_forced == 2 && emv_q4x4_avxvnni_available() : emv_q4x4_avxvnni_available();
	const q4a_fn *tab = vnni ? q4a_tab_vnni : q4a_tab_avx2;
	// Prefetch stops at the end of this call's last group; in a tile only
	// the first 8-row chunk streams the weights from memory.
	const uint8_t *lim = (const uint8_t *)p + (size_t)((r1 + 3) / 4) * gbytes;
	for (int64_t t0 = 0; t0 < n; t0 += tile) {
		int64_t tn = n - t0 < tile ? n - t0 : tile;
		// chunk c (8 rows from j0 = t0 + 8c): lanesums then scales, at scr + 8c*nb*36
		for (int64_t j0 = t0; j0 < t0 + tn; j0 += 8) {
			int nn = (int)(t0 + tn - j0 < 8 ? t0 + tn - j0 : 8);
			uint8_t *sc = scr + (size_t)(j0 - t0) * nb * 36;
			q4a_prep(nb, (const uint8_t *)a + (size_t)j0 * as, as, nn, (float *)(sc + (size_t)nn * nb * 32), sc);
		}
		if (tn <= 8) {
			tab[tn - 1]((const uint8_t *)p, gbytes, nb, (const uint8_t *)a + (size_t)t0 * as, as, scr,
			            (const float *)(scr + (size_t)tn * nb * 32), y + (size_t)t0 * ldy, ldy, r0, r1, lim);
			continue;
		}
		for (int64_t s0 = r0, s1; s0 < r1; s0 = s1) {
			s1 = (s0 / (4 * Q4A_GROUPS) + 1) * (4 * Q4A_GROUPS);
			if (s1 > r1) s1 = r1;
			for (int64_t j0 = t0; j0 < t0 + tn; j0 += 8) {
				int nn = (int)(t0 + tn - j0 < 8 ? t0 + tn - j0 : 8);
				const uint8_t *sc = scr + (size_t)(j0 - t0) * nb * 36;
				tab[nn - 1]((const uint8_t *)p, gbytes, nb, (const uint8_t *)a + (size_t)j0 * as, as, sc,
				            (const float *)(sc + (size_t)nn * nb * 32), y + (size_t)j0 * ldy, ldy, s0, s1,
				            j0 == t0 ? lim : NULL);
			}
		}
	}
	return 0;
}
#else
void emv_q4x4_force_avx2(int mode) { (void)mode; }
int emv_q4x4_avx2_available(void) { return 0; }
int emv_q4x4_avxvnni_available(void) { return 0; }
int emv_q4x4_usable(void) { return emv_q4x4_available(); }
int emv_q4x4_avx2_selected(void) { return 0; }

int emv_q4x4_matvec_avx2(const void *p, int64_t rows, int64_t k, int64_t r0, int64_t r1, const void *a, size_t as,
                         int64_t n, float *y, size_t ldy) {
	(void)p, (void)a, (void)as, (void)y, (void)ldy;
	if (rows <= 0 || k <= 0 || k % Q4A_QK != 0 || n < 1 || r0 < 0 || r1 < r0 || r1 > rows) return -1;
	return -2;
}
#endif
