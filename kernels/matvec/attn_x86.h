// attn.c's AVX2 (+FMA+F16C) and AVX-512F pieces: the contract's arithmetic,
// vectorised (included by attn.c only, on x86-64).
#ifndef EDGELLM_ATTN_X86_H
#define EDGELLM_ATTN_X86_H

#define ATTN_T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define ATTN_T_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define ATTN_INLINE static inline __attribute__((always_inline))

// The fold of the contract on lanes 0..7 + 8..15 already added: matvec.c's
// eight-lane tree.
ATTN_T_AVX2 ATTN_INLINE float attn_hsum8(__m256 v8) {
	__m128 v = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
	v = _mm_add_ps(v, _mm_movehl_ps(v, v));
	v = _mm_add_ss(v, _mm_movehdup_ps(v));
	return _mm_cvtss_f32(v);
}

// The same tree on four 8-lane vectors at once: r[0..3] = fold(y0..y3).
// permute2f128 + add gives each its w = (v0+v4, v1+v5, v2+v6, v3+v7), the
// shuffles then (w0+w2) + (w1+w3): the tree's order.
ATTN_T_AVX2 ATTN_INLINE void attn_hsum8x4(__m256 y0, __m256 y1, __m256 y2, __m256 y3, float *r) {
	__m256 a = _mm256_add_ps(_mm256_permute2f128_ps(y0, y1, 0x20), _mm256_permute2f128_ps(y0, y1, 0x31));
	__m256 b = _mm256_add_ps(_mm256_permute2f128_ps(y2, y3, 0x20), _mm256_permute2f128_ps(y2, y3, 0x31));
	__m256 s = _mm256_add_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
	__m256 t = _mm256_add_ps(_mm256_shuffle_ps(s, s, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(s, s, _MM_SHUFFLE(3, 1, 3, 1)));
	// t: [y0, y2, y0, y2 | y1, y3, y1, y3]
	float o[8];
	_mm256_storeu_ps(o, t);
	r[0] = o[0], r[1] = o[4], r[2] = o[1], r[3] = o[5];
}

// One position's score (DOT1) or, for four positions none of which is
// masked, four at a time (DOT4): the same bits.
#define ATTN_SCORE1(DOT1, c)                                                                                   \
	do {                                                                                                   \
		float mv_ = m ? m[c] : 0.0f;                                                                   \
		if (mv_ == -INFINITY) {                                                                        \
			s[c] = -INFINITY;                                                                      \
		} else {                                                                                       \
			s[c] = attn_post(DOT1(q, k + (size_t)(c) * ks, hd), scale, softcap, mv_);              \
			if (s[c] > mx) mx = s[c];                                                              \
		}                                                                                              \
	} while (0)

#define ATTN_SCORES(DOT1, DOT4)                                                                                \
	float mx = -INFINITY;                                                                                  \
	int64_t c = c0;                                                                                        \
	if (hd % 16 == 0)                                                                                      \
		for (; c + 4 <= c1; c += 4) {                                                                  \
			if (m && (m[c] == -INFINITY || m[c + 1] == -INFINITY || m[c + 2] == -INFINITY ||       \
			          m[c + 3] == -INFINITY)) {                                                    \
				for (int l = 0; l < 4; l++) ATTN_SCORE1(DOT1, c + l);                          \
				continue;                                                                      \
			}                                                                                      \
			float d[4];                                                                            \
			DOT4(q, k + (size_t)c * ks, ks, hd, d);                                                \
			for (int l = 0; l < 4; l++) {                                                          \
				s[c + l] = attn_post(d[l], scale, softcap, m ? m[c + l] : 0.0f);               \
				if (s[c + l] > mx) mx = s[c + l];                                              \
			}                                                                                      \
		}                                                                                              \
	for (; c < c1; c++) ATTN_SCORE1(DOT1, c);                                                              \
	return mx;

// ---- AVX2: lanes 0..7 in lo, 8..15 in hi ----

ATTN_T_AVX2 ATTN_INLINE __m256 attn_exp8(__m256 x) {
	__m256 ok = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
	__m256 magic = _mm256_set1_ps(ATTN_MAGIC);
	__m256 kf = _mm256_fmadd_ps(x, _mm256_set1_ps(ATTN_LOG2E), magic);
	__m256i n = _mm256_sub_epi32(_mm256_castps_si256(kf), _mm256_castps_si256(magic));
	kf = _mm256_sub_ps(kf, magic);
	__m256 r = _mm256_fmadd_ps(kf, _mm256_set1_ps(-ATTN_LN2_HI), x);
	r = _mm256_fmadd_ps(kf, _mm256_set1_ps(ATTN_LN2_LO), r);
	__m256 p = _mm256_set1_ps(ATTN_P0);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_P1));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_P2));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_P3));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_P4));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_P5));
	__m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
	__m256 sc = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
	return _mm256_and_ps(_mm256_mul_ps(y, sc), ok);
}

ATTN_T_AVX2 static float attn_dot_avx2(const float *q, const uint8_t *k, int64_t hd) {
	__m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
	int64_t i = 0;
	for (; i + 16 <= hd; i += 16) {
		lo = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + 2 * i))), _mm256_loadu_ps(q + i), lo);
		hi = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + 2 * i + 16))),
		                     _mm256_loadu_ps(q + i + 8), hi);
	}
	if (i == hd) return attn_hsum8(_mm256_add_ps(lo, hi));
	float acc[16];
	_mm256_storeu_ps(acc, lo);
	_mm256_storeu_ps(acc + 8, hi);
	for (; i < hd; i++) acc[i % 16] = fmaf(emv_h2f(k + 2 * i), q[i], acc[i % 16]);
	return attn_fold16(acc);
}

// Four rows' dots (hd a multiple of 16): lanes as attn_dot_avx2.
ATTN_T_AVX2 ATTN_INLINE void attn_dot4_avx2(const float *q, const uint8_t *k, size_t ks, int64_t hd, float *d) {
	__m256 lo[4], hi[4];
	for (int r = 0; r < 4; r++) lo[r] = hi[r] = _mm256_setzero_ps();
	for (int64_t i = 0; i < hd; i += 16) {
		__m256 ql = _mm256_loadu_ps(q + i), qh = _mm256_loadu_ps(q + i + 8);
		for (int r = 0; r < 4; r++) {
			const uint8_t *kr = k + (size_t)r * ks + 2 * i;
			lo[r] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)kr)), ql, lo[r]);
			hi[r] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kr + 16))), qh, hi[r]);
		}
	}
	attn_hsum8x4(_mm256_add_ps(lo[0], hi[0]), _mm256_add_ps(lo[1], hi[1]), _mm256_add_ps(lo[2], hi[2]),
	             _mm256_add_ps(lo[3], hi[3]), d);
}

ATTN_T_AVX2 static float attn_scores_avx2(const float *q, const uint8_t *k, size_t ks, int64_t hd, int64_t c0,
                                          int64_t c1, const float *m, float scale, float softcap, float *s) {
	ATTN_SCORES(attn_dot_avx2, attn_dot4_avx2)
}

ATTN_T_AVX2 static float attn_expsum_avx2(float *s, int64_t n, float M) {
	__m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps(), mv = _mm256_set1_ps(M);
	int64_t c = 0;
	for (; c + 16 <= n; c += 16) {
		__m256 pl = attn_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + c), mv));
		__m256 ph = attn_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + c + 8), mv));
		_mm256_storeu_ps(s + c, pl);
		_mm256_storeu_ps(s + c + 8, ph);
		lo = _mm256_add_ps(lo, pl);
		hi = _mm256_add_ps(hi, ph);
	}
	float acc[16];
	_mm256_storeu_ps(acc, lo);
	_mm256_storeu_ps(acc + 8, hi);
	for (; c < n; c++) {
		s[c] = attn_exp(s[c] - M);
		acc[c % 16] = acc[c % 16] + s[c];
	}
	return attn_fold16(acc);
}

ATTN_T_AVX2 static void attn_axpy_avx2(float *acc, const float *p, const uint8_t *v, size_t vs, int64_t hd,
                                       int64_t c0, int64_t c1) {
	int64_t d = 0;
	for (; d + 32 <= hd; d += 32) {
		__m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8);
		__m256 a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
		for (int64_t c = c0; c < c1; c++) {
			if (p[c] == 0.0f) continue;
			__m256 pv = _mm256_set1_ps(p[c]);
			const __m128i *vr = (const __m128i *)(v + (size_t)c * vs + 2 * d);
			a0 = _mm256_fmadd_ps(pv, _mm256_cvtph_ps(_mm_loadu_si128(vr)), a0);
			a1 = _mm256_fmadd_ps(pv, _mm256_cvtph_ps(_mm_loadu_si128(vr + 1)), a1);
			a2 = _mm256_fmadd_ps(pv, _mm256_cvtph_ps(_mm_loadu_si128(vr + 2)), a2);
			a3 = _mm256_fmadd_ps(pv, _mm256_cvtph_ps(_mm_loadu_si128(vr + 3)), a3);
		}
		_mm256_storeu_ps(acc + d, a0);
		_mm256_storeu_ps(acc + d + 8, a1);
		_mm256_storeu_ps(acc + d + 16, a2);
		_mm256_storeu_ps(acc + d + 24, a3);
	}
	for (; d + 8 <= hd; d += 8) {
		__m256 a0 = _mm256_loadu_ps(acc + d);
		for (int64_t c = c0; c < c1; c++)
			if (p[c] != 0.0f)
				a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[c]),
				                     _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + (size_t)c * vs + 2 * d))), a0);
		_mm256_storeu_ps(acc + d, a0);
	}
	if (d < hd) attn_axpy_scalar(acc + d, p, v + 2 * d, vs, hd - d, c0, c1);
}

ATTN_T_AVX2 static void attn_h2f_avx2(const uint8_t *h, int64_t n, float *f) {
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 2 * i))));
	for (; i < n; i++) f[i] = emv_h2f(h + 2 * i);
}

static const attn_ops attn_avx2 = {attn_scores_avx2, attn_expsum_avx2, attn_axpy_avx2, attn_h2f_avx2};

// ---- AVX-512: lanes 0..15 in one zmm ----

ATTN_T_AVX512 ATTN_INLINE __m512 attn_exp16(__m512 x) {
	__mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
	__m512 magic = _mm512_set1_ps(ATTN_MAGIC);
	__m512 kf = _mm512_fmadd_ps(x, _mm512_set1_ps(ATTN_LOG2E), magic);
	__m512i n = _mm512_sub_epi32(_mm512_castps_si512(kf), _mm512_castps_si512(magic));
	kf = _mm512_sub_ps(kf, magic);
	__m512 r = _mm512_fmadd_ps(kf, _mm512_set1_ps(-ATTN_LN2_HI), x);
	r = _mm512_fmadd_ps(kf, _mm512_set1_ps(ATTN_LN2_LO), r);
	__m512 p = _mm512_set1_ps(ATTN_P0);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_P1));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_P2));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_P3));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_P4));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_P5));
	__m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
	__m512 sc = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
	return _mm512_maskz_mul_ps(ok, y, sc);
}

ATTN_T_AVX512 ATTN_INLINE float attn_hsum16(__m512 a) {
	return attn_hsum8(_mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)));
}

ATTN_T_AVX512 static float attn_dot_avx512(const float *q, const uint8_t *k, int64_t hd) {
	__m512 a = _mm512_setzero_ps();
	int64_t i = 0;
	for (; i + 16 <= hd; i += 16)
		a = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k + 2 * i))), _mm512_loadu_ps(q + i), a);
	if (i < hd) { // masked last chunk: absent lanes kept
		__mmask16 m = (__mmask16)((1u << (hd - i)) - 1);
		a = _mm512_mask3_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, k + 2 * i)), _mm512_maskz_loadu_ps(m, q + i),
		                          a, m);
	}
	return attn_hsum16(a);
}

// Four rows' dots (hd a multiple of 16): lanes as attn_dot_avx512.
ATTN_T_AVX512 ATTN_INLINE void attn_dot4_avx512(const float *q, const uint8_t *k, size_t ks, int64_t hd, float *d) {
	__m512 a[4];
	for (int r = 0; r < 4; r++) a[r] = _mm512_setzero_ps();
	for (int64_t i = 0; i < hd; i += 16) {
		__m512 qv = _mm512_loadu_ps(q + i);
		for (int r = 0; r < 4; r++)
			a[r] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k + (size_t)r * ks + 2 * i))), qv,
			                       a[r]);
	}
#define ATTN_HALVES(x) _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1))
	attn_hsum8x4(ATTN_HALVES(a[0]), ATTN_HALVES(a[1]), ATTN_HALVES(a[2]), ATTN_HALVES(a[3]), d);
#undef ATTN_HALVES
}

ATTN_T_AVX512 static float attn_scores_avx512(const float *q, const uint8_t *k, size_t ks, int64_t hd, int64_t c0,
                                              int64_t c1, const float *m, float scale, float softcap, float *s) {
	ATTN_SCORES(attn_dot_avx512, attn_dot4_avx512)
}

ATTN_T_AVX512 static float attn_expsum_avx512(float *s, int64_t n, float M) {
	__m512 a = _mm512_setzero_ps(), mv = _mm512_set1_ps(M);
	int64_t c = 0;
	for (; c + 16 <= n; c += 16) {
		__m512 p = attn_exp16(_mm512_sub_ps(_mm512_loadu_ps(s + c), mv));
		_mm512_storeu_ps(s + c, p);
		a = _mm512_add_ps(a, p);
	}
	if (c < n) {
		__mmask16 m = (__mmask16)((1u << (n - c)) - 1);
		__m512 p = _mm512_maskz_mov_ps(m, attn_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + c), mv)));
		_mm512_mask_storeu_ps(s + c, m, p);
		a = _mm512_add_ps(a, p); // absent lanes add +0
	}
	return attn_hsum16(a);
}

ATTN_T_AVX512 static void attn_axpy_avx512(float *acc, const float *p, const uint8_t *v, size_t vs, int64_t hd,
                                           int64_t c0, int64_t c1) {
	int64_t d = 0;
	for (; d + 64 <= hd; d += 64) {
		__m512 a0 = _mm512_loadu_ps(acc + d), a1 = _mm512_loadu_ps(acc + d + 16);
		__m512 a2 = _mm512_loadu_ps(acc + d + 32), a3 = _mm512_loadu_ps(acc + d + 48);
		for (int64_t c = c0; c < c1; c++) {
			if (p[c] == 0.0f) continue;
			__m512 pv = _mm512_set1_ps(p[c]);
			const __m256i *vr = (const __m256i *)(v + (size_t)c * vs + 2 * d);
			a0 = _mm512_fmadd_ps(pv, _mm512_cvtph_ps(_mm256_loadu_si256(vr)), a0);
			a1 = _mm512_fmadd_ps(pv, _mm512_cvtph_ps(_mm256_loadu_si256(vr + 1)), a1);
			a2 = _mm512_fmadd_ps(pv, _mm512_cvtph_ps(_mm256_loadu_si256(vr + 2)), a2);
			a3 = _mm512_fmadd_ps(pv, _mm512_cvtph_ps(_mm256_loadu_si256(vr + 3)), a3);
		}
		_mm512_storeu_ps(acc + d, a0);
		_mm512_storeu_ps(acc + d + 16, a1);
		_mm512_storeu_ps(acc + d + 32, a2);
		_mm512_storeu_ps(acc + d + 48, a3);
	}
	for (; d + 16 <= hd; d += 16) {
		__m512 a0 = _mm512_loadu_ps(acc + d);
		for (int64_t c = c0; c < c1; c++)
			if (p[c] != 0.0f)
				a0 = _mm512_fmadd_ps(_mm512_set1_ps(p[c]),
				                     _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + (size_t)c * vs + 2 * d))), a0);
		_mm512_storeu_ps(acc + d, a0);
	}
	if (d < hd) attn_axpy_scalar(acc + d, p, v + 2 * d, vs, hd - d, c0, c1);
}

ATTN_T_AVX512 static void attn_h2f_avx512(const uint8_t *h, int64_t n, float *f) {
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(f + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + 2 * i))));
	for (; i < n; i++) f[i] = emv_h2f(h + 2 * i);
}

static const attn_ops attn_avx512 = {attn_scores_avx512, attn_expsum_avx512, attn_axpy_avx512, attn_h2f_avx512};
#endif
