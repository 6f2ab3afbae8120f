// The q4x4 kernel for many activation rows (prefill): see matvec_q4x4_gemm.c.
#ifndef EDGELLM_MATVEC_Q4X4_GEMM_H
#define EDGELLM_MATVEC_Q4X4_GEMM_H
#include <stddef.h>
#include <stdint.h>

// emv_q4x4_gemm is emv_q4x4_matvec (matvec_q4x4.h) for any n >= 1, tiled
// for many rows: the same arguments and results, each output bitwise the
// 1-row call's. Returns 0, -1 on bad arguments, or -2 when this CPU lacks
// AVX-512 VNNI or the scratch cannot be had (nothing written; the caller
// runs emv_q4x4_matvec's own path 8 rows at a time).
int emv_q4x4_gemm(const void *p, int64_t rows, int64_t k, int64_t r0, int64_t r1, const void *a, size_t astride,
                  int64_t n, float *y, size_t ldy);
#endif
