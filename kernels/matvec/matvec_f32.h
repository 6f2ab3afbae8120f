// matvec_f32.h: edgellm's own F32/F16-weight matrix-vector kernels for 1..8
// F32 activation rows (issue #31 point 2). Separate from matvec.h (the
// quantised kernels); see matvec_f32.c for the arithmetic contract.
#ifndef EDGELLM_MATVEC_F32_H
#define EDGELLM_MATVEC_F32_H
#include <stddef.h>
#include <stdint.h>

// Lanes of the contract: element i of a row goes to lane i % EMVF_LANES.
#define EMVF_LANES 16

// Weight types: ggml's enum ggml_type values.
enum { EMV_F32 = 0, EMV_F16 = 1 };

// emv_matvec_f32 computes y[j*ldy + r] = dot(weight row r, x row j) for
// weight rows r in [r0, r1) and activation rows j in [0, n) (n >= 1; rows
// beyond 8 are done 8 at a time). w holds rows of k elements of type t
// (F32 or F16), wstride bytes apart; x holds n F32 rows, xstride bytes
// apart. impl is one of matvec.h's EMV_* implementations this CPU runs
// (EMV_BEST: the best; AVX-512 here needs only F/BW/VL/DQ, but the
// dispatch follows emv_best_impl; EMV_NEONDOT, EMV_NEONI8MM and
// EMV_SCALAR8 run the scalar path: one float contract, no F32 NEON kernel
// yet). Returns 0, or -1 on bad arguments (nothing written).
int emv_matvec_f32(int t, int impl, const void *w, size_t wstride, int64_t k, int64_t r0, int64_t r1,
                   const float *x, size_t xstride, int64_t n, float *y, size_t ldy);

// emv_matvec_f32_split is emv_matvec_f32 over every row [0, rows), computed
// by the nth threads of a pool together, thread ith calling it, sharing the
// rows through split as matvec.h's emv_matvec_split does (units: the
// kernel's rows per pass, 4 or 2 for AVX-512, 2 or 1 for AVX2, 1 scalar;
// for n > 8 those of the last pass's n % 8 rows). The same bits as any
// static split. Returns the units this thread computed (>= 0), -1 on bad
// arguments, or -2 (more than EMV_SPLIT_MAX threads: split untouched, the
// caller splits statically).
int emv_matvec_f32_split(int t, int impl, const void *w, size_t wstride, int64_t rows, int64_t k, const float *x,
                         size_t xstride, int64_t n, float *y, size_t ldy, void *split, int ith, int nth);
#endif
