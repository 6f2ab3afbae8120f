// edgellm matvec kernels for arm64: NEON with the dot product extension
// (ARMv8.2-A dotprod, SDOT), written for this project from ggml's block
// formats. Compiled only for GOARCH=arm64 (the _arm64 file name); the base
// build stays at the build's -march (armv8-a is enough): the kernels carry a
// per-function target attribute and are chosen at run time from
// getauxval(AT_HWCAP) & HWCAP_ASIMDDP (emv_neon_detect), so a CPU without
// dotprod (Cortex-A53, A55 before r1, A72, ...) runs the scalar reference.
//
// Same arithmetic contract as matvec.c, bit for bit: vdotq_s32 on 16 bytes
// gives four int32 lanes, lane l the exact sum of the products of elements
// 4l..4l+3, which is the contract's lane grouping. A block is two SDOTs
// (elements 0..15 give lanes 0..3, 16..31 lanes 4..7), so one row's eight
// f32 lanes are two float32x4_t, updated with vfmaq_f32 (one fused
// multiply-add per lane, as fmaf), and summed by the same fixed tree:
// v = lo + hi is (a0+a4, a1+a5, a2+a6, a3+a7); (v0+v2) + (v1+v3).
//
// NEONI8MM (below the dotprod kernels) follows the second contract, C8
// (matvec_c8.c): SMMLA (vmmlaq_s32, ARMv8.6-A i8mm, optional from v8.2-A)
// multiplies a 2x8 int8 matrix (two weight rows' 8-element chunk l) by an
// 8x2 one (two activation rows' chunk l) into [w0.x0, w0.x1, w1.x0, w1.x1],
// exact int32 sums of 8 products: lane l of the C8 contract for a 2x2 tile
// of outputs (n = 1: SDOT plus a pairwise add, the same integers). Chosen
// when getauxval(AT_HWCAP2) & HWCAP2_I8MM and dotprod are both present.
#if defined(__aarch64__)
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "matvec.h"

#if defined(__clang__)
#define EMV_T_DOT __attribute__((target("dotprod")))
#else
#define EMV_T_DOT __attribute__((target("arch=armv8.2-a+dotprod")))
#endif
// GCC inlines an always_inline function only into callers whose ISA covers
// the callee's, and a helper without a target attribute has the build's
// -march: with -march=armv8.2-a+dotprod+fp16 (or +i8mm) it has features
// the kernels' "arch=armv8.2-a+dotprod" lacks, and the build failed. So
// every helper the kernels inline carries EMV_T_DOT, the prefetch ones
// through EMV_PF_TARGET.
#define EMV_PF_TARGET EMV_T_DOT
#include "emv_prefetch.h"

#include <arm_neon.h>
#include <string.h>
#include <sys/auxv.h>

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef AT_HWCAP2
#define AT_HWCAP2 26
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif

#define EMV_INLINE static inline __attribute__((always_inline))

// SDOT. GCC's arm_neon.h declares vdotq_s32 for functions whose target has
// dotprod; clang's (14, checked) declares it only when the whole file is
// built with dotprod (__ARM_FEATURE_DOTPROD), so there the instruction is
// written out (the .arch directive lets the assembler take it at any
// -march; clang 14's assembler has no ".arch_extension dotprod").
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
EMV_T_DOT EMV_INLINE int32x4_t emv_sdot(int32x4_t acc, int8x16_t a, int8x16_t b) {
	__asm__(".arch armv8.2-a+dotprod\n\tsdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
	return acc;
}
#else
#define emv_sdot vdotq_s32
#endif

int emv_neon_detect(void) {
	if (!(getauxval(AT_HWCAP) & HWCAP_ASIMDDP)) return EMV_SCALAR;
	return (getauxval(AT_HWCAP2) & HWCAP2_I8MM) ? EMV_NEONI8MM : EMV_NEONDOT;
}

// fp16 -> f32 (FCVT, base ARMv8-A; exact, subnormal halves included).
EMV_T_DOT EMV_INLINE float emv_neon_h2f(const uint8_t *p) {
	__fp16 h;
	memcpy(&h, p, 2);
	return (float)h;
}

// The 32 signed weights of one block: elements 0..15 in *w0, 16..31 in *w1.
EMV_T_DOT EMV_INLINE void emv_neon_w(int t, const uint8_t *blk, int8x16_t *w0, int8x16_t *w1) {
	if (t == EMV_Q8_0) {
		*w0 = vld1q_s8((const int8_t *)(blk + 2));
		*w1 = vld1q_s8((const int8_t *)(blk + 18));
		return;
	}
	uint8x16_t q = vld1q_u8(blk + 2);
	int8x16_t eight = vdupq_n_s8(8);
	*w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), eight);
	*w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
}

// The contract's tree ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)), lo = a0..a3.
EMV_T_DOT EMV_INLINE float emv_neon_hsum(float32x4_t lo, float32x4_t hi) {
	float32x4_t v = vaddq_f32(lo, hi);
	float32x2_t w = vadd_f32(vget_low_f32(v), vget_high_f32(v));
	return vget_lane_f32(w, 0) + vget_lane_f32(w, 1);
}

// R weight rows (r .. r+R-1) by n activation rows: each weight block is
// loaded (Q4_0: unpacked) once and multiplied into all n rows. R only
// interleaves independent rows' chains; no row's arithmetic depends on it.
// While they compute, the next R rows (up to row r1-1) are prefetched into
// L2 (PRFM PLDL2KEEP), as on x86 (emv_prefetch.h; not measured on hardware).
EMV_T_DOT EMV_INLINE void emv_neon_rows(int t, int R, const uint8_t *w, size_t ws, int nb, int64_t r, int64_t r1,
                                        const uint8_t *a, size_t as, int n, float *y, size_t ldy) {
	size_t bsz = t == EMV_Q8_0 ? EMV_Q8_BYTES : EMV_Q4_BYTES;
	const int32x4_t zero = vdupq_n_s32(0);
	float32x4_t lo[2][EMV_MAXN], hi[2][EMV_MAXN];
	for (int i = 0; i < R; i++)
		for (int j = 0; j < n; j++) lo[i][j] = hi[i][j] = vdupq_n_f32(0.0f);
	const uint8_t *wr = w + (size_t)r * ws;
	emv_pf pf = emv_pf_rows(w, ws, (size_t)nb * bsz, r, R, r1, nb);
	for (int b = 0; b < nb; b++) {
		int8x16_t w0[2], w1[2];
		float dw[2];
		emv_pf_step(&pf, b);
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = wr + (size_t)i * ws + (size_t)b * bsz;
			emv_neon_w(t, blk, &w0[i], &w1[i]);
			dw[i] = emv_neon_h2f(blk);
		}
		for (int j = 0; j < n; j++) {
			const uint8_t *ab = a + (size_t)j * as + (size_t)b * EMV_Q8_BYTES;
			int8x16_t a0 = vld1q_s8((const int8_t *)(ab + 2)), a1 = vld1q_s8((const int8_t *)(ab + 18));
			float da = emv_neon_h2f(ab);
			for (int i = 0; i < R; i++) {
				float32x4_t s = vdupq_n_f32(dw[i] * da);
				lo[i][j] = vfmaq_f32(lo[i][j], vcvtq_f32_s32(emv_sdot(zero, w0[i], a0)), s);
				hi[i][j] = vfmaq_f32(hi[i][j], vcvtq_f32_s32(emv_sdot(zero, w1[i], a1)), s);
			}
		}
	}
	for (int j = 0; j < n; j++)
		for (int i = 0; i < R; i++) y[(size_t)j * ldy + r + i] = emv_neon_hsum(lo[i][j], hi[i][j]);
}

// Two rows at a time up to n = 4 (4n accumulators), one above (2n: n = 8
// takes 16 of the 32 vector registers). The split is a register budget,
// not measured on hardware.
EMV_T_DOT EMV_INLINE void emv_neon_n(int t, const uint8_t *w, size_t ws, int nb, int64_t r0, int64_t r1,
                                     const uint8_t *a, size_t as, int n, float *y, size_t ldy) {
	int64_t r = r0;
	if (n <= 4)
		for (; r + 1 < r1; r += 2) emv_neon_rows(t, 2, w, ws, nb, r, r1, a, as, n, y, ldy);
	for (; r < r1; r++) emv_neon_rows(t, 1, w, ws, nb, r, r1, a, as, n, y, ldy);
}

// One function per (type, n): the accumulators stay in registers and the
// loops over j and i unroll.
typedef void (*emv_neon_fn)(const uint8_t *, size_t, int, int64_t, int64_t, const uint8_t *, size_t, float *,
                            size_t);
#define EMV_NFN(T, TN, N)                                                                                  \
	EMV_T_DOT static void emv_neondot_##TN##_##N(const uint8_t *w, size_t ws, int nb, int64_t r0,         \
	                                             int64_t r1, const uint8_t *a, size_t as, float *y,        \
	                                             size_t ldy) {                                             \
		emv_neon_n(T, w, ws, nb, r0, r1, a, as, N, y, ldy);                                            \
	}
// Every n = 1..8 of one (type, kernel): FN(T, TN, N) defines the function
// named PFX TN _N (emv_neondot_q8_3), and EMV_TAB8 lists the eight in order.
#define EMV_EACH8(FN, T, TN)                                                                               \
	FN(T, TN, 1) FN(T, TN, 2) FN(T, TN, 3) FN(T, TN, 4) FN(T, TN, 5) FN(T, TN, 6) FN(T, TN, 7) FN(T, TN, 8)
#define EMV_TAB8(PFX, TN)                                                                                  \
	{ PFX##TN##_1, PFX##TN##_2, PFX##TN##_3, PFX##TN##_4, PFX##TN##_5, PFX##TN##_6, PFX##TN##_7, PFX##TN##_8 }
EMV_EACH8(EMV_NFN, EMV_Q8_0, q8)
EMV_EACH8(EMV_NFN, EMV_Q4_0, q4)
static const emv_neon_fn emv_neondot_q8[EMV_MAXN] = EMV_TAB8(emv_neondot_, q8);
static const emv_neon_fn emv_neondot_q4[EMV_MAXN] = EMV_TAB8(emv_neondot_, q4);

// ---- NEON i8mm: contract C8 ----

#if defined(__clang__)
#define EMV_T_MM __attribute__((target("dotprod,i8mm")))
#else
#define EMV_T_MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#endif

// SMMLA, as emv_sdot: clang declares vmmlaq_s32 only when the whole file
// has i8mm (__ARM_FEATURE_MATMUL_INT8), so there it is written out.
#if defined(__clang__) && !defined(__ARM_FEATURE_MATMUL_INT8)
EMV_T_MM EMV_INLINE int32x4_t emv_smmla(int32x4_t acc, int8x16_t a, int8x16_t b) {
	__asm__(".arch armv8.2-a+i8mm\n\tsmmla %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
	return acc;
}
#else
#define emv_smmla vmmlaq_s32
#endif

// Two rows' 16 bytes u (row 0) and v (row 1) as SMMLA operands: *c0 holds
// both rows' elements 0..7, *c1 their elements 8..15.
EMV_T_MM EMV_INLINE void emv_mm_pair(int8x16_t u, int8x16_t v, int8x16_t *c0, int8x16_t *c1) {
	int64x2_t x = vreinterpretq_s64_s8(u), z = vreinterpretq_s64_s8(v);
	*c0 = vreinterpretq_s8_s64(vzip1q_s64(x, z));
	*c1 = vreinterpretq_s8_s64(vzip2q_s64(x, z));
}

// Weight rows r and r+1 (a zero row when r+1 = r1) by n activation rows in
// 2x2 tiles (rows j, j+1; zeros for j+1 = n): per block and tile four
// SMMLA (chunks l = 0..3), each converted and fma'd once with the scales
// [dw0*dx0, dw0*dx1, dw1*dx0, dw1*dx1] (one f32 product each, as the
// reference); the padding's outputs are dropped. Each weight block is
// loaded (Q4_0: unpacked) once. The next two rows are prefetched as in
// emv_neon_rows.
EMV_T_MM EMV_INLINE void emv_mm_rows(int t, const uint8_t *w, size_t ws, int nb, int64_t r, int64_t r1,
                                     const uint8_t *a, size_t as, int n, float *y, size_t ldy) {
	size_t bsz = t == EMV_Q8_0 ? EMV_Q8_BYTES : EMV_Q4_BYTES;
	const int two = r + 1 < r1, P = (n + 1) / 2;
	const int32x4_t zero = vdupq_n_s32(0);
	float32x4_t acc[EMV_MAXN / 2][4];
	for (int p = 0; p < P; p++)
		for (int l = 0; l < 4; l++) acc[p][l] = vdupq_n_f32(0.0f);
	const uint8_t *w0 = w + (size_t)r * ws;
	emv_pf pf = emv_pf_rows(w, ws, (size_t)nb * bsz, r, 2, r1, nb);
	for (int b = 0; b < nb; b++) {
		const uint8_t *b0 = w0 + (size_t)b * bsz;
		emv_pf_step(&pf, b);
		int8x16_t p0, p1, q0 = vdupq_n_s8(0), q1 = vdupq_n_s8(0), wc[4];
		float d0 = emv_neon_h2f(b0), d1 = 0.0f;
		emv_neon_w(t, b0, &p0, &p1);
		if (two) {
			emv_neon_w(t, b0 + ws, &q0, &q1);
			d1 = emv_neon_h2f(b0 + ws);
		}
		emv_mm_pair(p0, q0, &wc[0], &wc[1]);
		emv_mm_pair(p1, q1, &wc[2], &wc[3]);
		float32x4_t dw = vcombine_f32(vdup_n_f32(d0), vdup_n_f32(d1));
		for (int p = 0; p < P; p++) {
			const uint8_t *ab = a + (size_t)(2 * p) * as + (size_t)b * EMV_Q8_BYTES;
			int8x16_t x0 = vld1q_s8((const int8_t *)(ab + 2)), x1 = vld1q_s8((const int8_t *)(ab + 18));
			int8x16_t z0 = vdupq_n_s8(0), z1 = vdupq_n_s8(0), ac[4];
			float e[2] = {emv_neon_h2f(ab), 0.0f};
			if (2 * p + 1 < n) {
				z0 = vld1q_s8((const int8_t *)(ab + as + 2));
				z1 = vld1q_s8((const int8_t *)(ab + as + 18));
				e[1] = emv_neon_h2f(ab + as);
			}
			emv_mm_pair(x0, z0, &ac[0], &ac[1]);
			emv_mm_pair(x1, z1, &ac[2], &ac[3]);
			float32x2_t da = vld1_f32(e);
			float32x4_t s = vmulq_f32(dw, vcombine_f32(da, da));
			for (int l = 0; l < 4; l++)
				acc[p][l] = vfmaq_f32(acc[p][l], vcvtq_f32_s32(emv_smmla(zero, wc[l], ac[l])), s);
		}
	}
	// C8's tree (a0+a2) + (a1+a3), all four outputs of a tile at once:
	// [y(r,j), y(r,j+1), y(r+1,j), y(r+1,j+1)].
	for (int p = 0; p < P; p++) {
		float v[4];
		vst1q_f32(v, vaddq_f32(vaddq_f32(acc[p][0], acc[p][2]), vaddq_f32(acc[p][1], acc[p][3])));
		int j = 2 * p;
		y[(size_t)j * ldy + r] = v[0];
		if (two) y[(size_t)j * ldy + r + 1] = v[2];
		if (j + 1 < n) {
			y[(size_t)(j + 1) * ldy + r] = v[1];
			if (two) y[(size_t)(j + 1) * ldy + r + 1] = v[3];
		}
	}
}

// n = 1: SMMLA against a zero activation row would waste half of every
// instruction and zip every block, so one activation row takes SDOT plus a
// pairwise add instead, the same exact integers: vpaddq_s32 of the two
// SDOTs' 4-product lanes [s0..s3], [s4..s7] is [s0+s1, s2+s3, s4+s5,
// s6+s7], C8's four 8-product lanes, in order. One conversion and one fma
// per row and block (NEONDot: two of each). R rows at a time (R = 4: four
// independent fma chains at n = 1, as NEONDot's two rows of lo and hi).
EMV_T_MM EMV_INLINE void emv_mm_rows1(int t, int R, const uint8_t *w, size_t ws, int nb, int64_t r, int64_t r1,
                                      const uint8_t *a, float *y) {
	size_t bsz = t == EMV_Q8_0 ? EMV_Q8_BYTES : EMV_Q4_BYTES;
	const int32x4_t zero = vdupq_n_s32(0);
	float32x4_t acc[4];
	for (int i = 0; i < R; i++) acc[i] = vdupq_n_f32(0.0f);
	const uint8_t *wr = w + (size_t)r * ws;
	emv_pf pf = emv_pf_rows(w, ws, (size_t)nb * bsz, r, R, r1, nb);
	for (int b = 0; b < nb; b++) {
		const uint8_t *ab = a + (size_t)b * EMV_Q8_BYTES;
		int8x16_t a0 = vld1q_s8((const int8_t *)(ab + 2)), a1 = vld1q_s8((const int8_t *)(ab + 18));
		float da = emv_neon_h2f(ab);
		emv_pf_step(&pf, b);
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = wr + (size_t)i * ws + (size_t)b * bsz;
			int8x16_t w0, w1;
			emv_neon_w(t, blk, &w0, &w1);
			int32x4_t l = vpaddq_s32(emv_sdot(zero, w0, a0), emv_sdot(zero, w1, a1));
			acc[i] = vfmaq_f32(acc[i], vcvtq_f32_s32(l), vdupq_n_f32(emv_neon_h2f(blk) * da));
		}
	}
	for (int i = 0; i < R; i++) { // (a0+a2) + (a1+a3)
		float32x2_t v = vadd_f32(vget_low_f32(acc[i]), vget_high_f32(acc[i]));
		y[r + i] = vget_lane_f32(v, 0) + vget_lane_f32(v, 1);
	}
}

#define EMV_MMFN(T, TN, N)                                                                                 \
	EMV_T_MM static void emv_neoni8mm_##TN##_##N(const uint8_t *w, size_t ws, int nb, int64_t r0,        \
	                                             int64_t r1, const uint8_t *a, size_t as, float *y,        \
	                                             size_t ldy) {                                             \
		int64_t r = r0;                                                                                \
		if (N == 1) {                                                                                  \
			for (; r + 3 < r1; r += 4) emv_mm_rows1(T, 4, w, ws, nb, r, r1, a, y);                  \
			for (; r < r1; r++) emv_mm_rows1(T, 1, w, ws, nb, r, r1, a, y);                          \
			return;                                                                                \
		}                                                                                              \
		for (; r < r1; r += 2) emv_mm_rows(T, w, ws, nb, r, r1, a, as, N, y, ldy);                     \
	}
EMV_EACH8(EMV_MMFN, EMV_Q8_0, q8)
EMV_EACH8(EMV_MMFN, EMV_Q4_0, q4)
static const emv_neon_fn emv_neoni8mm_q8[EMV_MAXN] = EMV_TAB8(emv_neoni8mm_, q8);
static const emv_neon_fn emv_neoni8mm_q4[EMV_MAXN] = EMV_TAB8(emv_neoni8mm_, q4);

int emv_neon_matvec(int t, int impl, const uint8_t *w, size_t ws, int nb, int64_t r0, int64_t r1,
                    const uint8_t *a, size_t as, int n, float *y, size_t ldy) {
	if (n < 1 || n > EMV_MAXN) return 0;
	if (impl == EMV_NEONDOT)
		(t == EMV_Q8_0 ? emv_neondot_q8 : emv_neondot_q4)[n - 1](w, ws, nb, r0, r1, a, as, y, ldy);
	else if (impl == EMV_NEONI8MM)
		(t == EMV_Q8_0 ? emv_neoni8mm_q8 : emv_neoni8mm_q4)[n - 1](w, ws, nb, r0, r1, a, as, y, ldy);
	else
		return 0;
	return 1;
}
#endif
