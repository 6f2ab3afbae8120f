// matvec.h: edgellm's own Q8_0/Q4_0 matrix-vector kernels for 1..8
// activation rows (issue #31). See doc.go for the layout and the reduction
// order that makes every row batch-invariant.
#ifndef EDGELLM_MATVEC_H
#define EDGELLM_MATVEC_H
#include <stdint.h>

#define EMV_QK 32
#define EMV_MAXN 8

// One block of quantised activations: scale, exact sum of qs, 32 int8.
typedef struct {
	float d;
	int32_t s;
	int8_t qs[EMV_QK];
} emv_xblock;

enum { EMV_SCALAR = 0, EMV_AVX2 = 1, EMV_AVX512VNNI = 2 };

int emv_best_impl(void);
void emv_quantize_x(const float *x, emv_xblock *xq, int k);
// y[j*ldy + r] for r in [r0, r1), j in [0, n): weight row r (ggml blocks,
// wstride bytes apart) dotted with activation row j (nb blocks each).
int emv_mul_q8_0(int impl, const void *w, long wstride, int nb, int r0, int r1,
                 const emv_xblock *xq, int n, float *y, long ldy);
int emv_mul_q4_0(int impl, const void *w, long wstride, int nb, int r0, int r1,
                 const emv_xblock *xq, int n, float *y, long ldy);
#endif
