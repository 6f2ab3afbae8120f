// matvec.h: edgellm's own Q8_0/Q4_0 matrix-vector kernels for 1..8
// activation rows (issue #31). See doc.go for the two arithmetic contracts
// (C4: 4-product lanes; C8: 8-product lanes, the i8mm kernel's) that make
// every row batch-invariant and every implementation bit-identical to its
// contract's scalar reference.
#ifndef EDGELLM_MATVEC_H
#define EDGELLM_MATVEC_H
#include <stddef.h>
#include <stdint.h>

#define EMV_QK 32
#define EMV_MAXN 8
#define EMV_Q8_BYTES 34 // ggml's block_q8_0: fp16 d, 32 int8
#define EMV_Q4_BYTES 18 // ggml's block_q4_0: fp16 d, 16 bytes of nibbles

// Weight types: ggml's enum ggml_type values, so ggml's tensor type passes
// straight through.
enum { EMV_Q4_0 = 2, EMV_Q8_0 = 8 };
// Implementations; EMV_BEST is "the best this CPU runs". Contract C4:
// EMV_SCALAR (its reference), EMV_AVX2, EMV_AVX512VNNI, EMV_NEONDOT;
// contract C8: EMV_SCALAR8 (its reference, every architecture) and
// EMV_NEONI8MM.
enum {
	EMV_BEST = -1,
	EMV_SCALAR = 0,
	EMV_AVX2 = 1,
	EMV_AVX512VNNI = 2,
	EMV_NEONDOT = 3,
	EMV_SCALAR8 = 4,
	EMV_NEONI8MM = 5,
};

int emv_best_impl(void);
// emv_impl_available reports whether this CPU runs implementation impl.
int emv_impl_available(int impl);

// emv_quantize_q8_0 quantises n rows of k floats (k % 32 == 0) to ggml Q8_0
// blocks, row after row, exactly as ggml's quantize_row_q8_0_ref does.
void emv_quantize_q8_0(const float *x, int n, int k, void *dst);

// emv_matvec computes y[j*ldy + r] = dot(weight row r, activation row j) for
// weight rows r in [r0, r1) and activation rows j in [0, n) (n >= 1; rows
// beyond 8 are done 8 at a time). w holds rows of k/32 blocks of type t,
// wstride bytes apart; a holds n Q8_0 rows, astride bytes apart. Each weight
// block is loaded once per 8 activation rows. Returns 0, or -1 on bad
// arguments (nothing written).
int emv_matvec(int t, int impl, const void *w, size_t wstride, int64_t k, int64_t r0, int64_t r1,
               const void *a, size_t astride, int64_t n, float *y, size_t ldy);

// emv_matvec_split is emv_matvec over every row [0, rows), computed by the
// nth threads of a pool together, thread ith calling it: the rows are
// shared through split (EMV_SPLIT_BYTES of zeroed memory per graph node,
// emv_split.h) in chunks of ~64 KB of weights, whole passes of the kernel,
// so a slower thread leaves its share's tail to the others. The same bits
// as emv_matvec with any static split. Returns the number of units (the
// kernel's rows per pass: 4 for AVX-512, else 1) this thread computed
// (>= 0), -1 on bad arguments, or -2 where it does not apply (more than
// EMV_SPLIT_MAX threads, the NEON kernels, dotprod and i8mm: they prefetch
// up to their call's last row only): split is untouched and the caller splits
// statically. Every thread gets the same answer for the same arguments.
int emv_matvec_split(int t, int impl, const void *w, size_t wstride, int64_t rows, int64_t k, const void *a,
                     size_t astride, int64_t n, float *y, size_t ldy, void *split, int ith, int nth);

// emv_scalar8 (matvec_c8.c): the C8 contract's portable reference on weight
// rows [r0, r1) for 1..8 activation rows (nb blocks per row).
void emv_scalar8(int t, const uint8_t *w, size_t ws, int nb, int64_t r0, int64_t r1, const uint8_t *a, size_t as,
                 int n, float *y, size_t ldy);

#if defined(__aarch64__)
// arm64 (matvec_arm64.c): the best NEON implementation this CPU runs
// (getauxval), and the NEON kernels for 1..8 rows (returns 0 when impl is
// not a NEON one, nothing done): EMV_NEONDOT (C4) and EMV_NEONI8MM (C8).
int emv_neon_detect(void);
int emv_neon_matvec(int t, int impl, const uint8_t *w, size_t ws, int nb, int64_t r0, int64_t r1,
                    const uint8_t *a, size_t as, int n, float *y, size_t ldy);
#endif
#endif
