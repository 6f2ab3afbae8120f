// The pieces the AVX-512 VNNI q4x4 kernels share (matvec_q4x4.c for n <= 8,
// matvec_q4x4_gemm.c for n > 8): reading one group's block and the
// contract's final sum of a group's accumulators. One definition, so the
// kernels cannot drift apart in the order that makes their rows bitwise
// equal. Include after <immintrin.h>, x86-64 only.
#ifndef EDGELLM_Q4X4_AVX512_H
#define EDGELLM_Q4X4_AVX512_H

#include <stdint.h>

#define Q4X4_AVX512_T __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define Q4X4_AVX512_INLINE static inline __attribute__((always_inline))

// q4x4_group_block: block b of the group at gp (nb blocks): its unsigned
// nibbles, low (contract lanes 0..3) and high (4..7), and its four rows'
// scales as f32, row L's in 128-bit chunk L.
Q4X4_AVX512_T Q4X4_AVX512_INLINE void q4x4_group_block(const uint8_t *gp, int nb, int b, __m512i *qlo, __m512i *qhi,
                                                      __m512 *dw) {
	const __m512i m = _mm512_set1_epi8(0x0f);
	const __m512i didx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
	__m512i v = _mm512_loadu_si512((const void *)(gp + (size_t)b * 64));
	*qlo = _mm512_and_si512(v, m);
	*qhi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
	__m128 d4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(gp + (size_t)nb * 64 + (size_t)b * 8)));
	*dw = _mm512_permutexvar_ps(didx, _mm512_castps128_ps512(d4));
}

// q4x4_store4: the contract's final sum of one group's accumulators (chunk
// L of lo / hi holds row rb+L's contract lanes 0..3 / 4..7): per lane
// v_l = a_l + a_{l+4}, then y = (v0+v2) + (v1+v3); rows [rb, rb+4) that
// lie in [r0, r1) are stored to yj.
Q4X4_AVX512_T Q4X4_AVX512_INLINE void q4x4_store4(__m512 lo, __m512 hi, int64_t rb, int64_t r0, int64_t r1,
                                                 float *yj) {
	const __m512i ridx = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
	__m512 v = _mm512_add_ps(lo, hi);
	__m512 t = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));
	t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));
	__m128 r = _mm512_castps512_ps128(_mm512_permutexvar_ps(ridx, t));
	if (rb >= r0 && rb + 4 <= r1) {
		_mm_storeu_ps(yj + rb, r);
	} else {
		float o[4];
		_mm_storeu_ps(o, r);
		for (int i = 0; i < 4; i++)
			if (rb + i >= r0 && rb + i < r1) yj[rb + i] = o[i];
	}
}

#endif
