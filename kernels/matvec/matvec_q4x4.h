// matvec_q4x4.h: edgellm's own interleaved Q4_0 layout ("q4x4") and its
// AVX-512 VNNI matrix-vector kernel for 1..8 activation rows (issue #31).
// Same arithmetic contract as emv_matvec (matvec.h, doc.go): the result of
// every (row, activation row) is bitwise the plain-block kernels'.
//
// Layout: weight rows in groups of 4 (the last group padded with zero
// rows); a group is nb*64 bytes of nibbles, then nb*8 bytes of scales
// (block b: the 4 rows' fp16 d, row order), padded to 64 bytes. The 64
// nibble bytes of block b are the 4 rows' 16 nibble bytes, row after row,
// so one 512-bit load masked with 0x0f gives elements 0..15 of the 4 rows
// (one row per 128-bit chunk, vpdpbusd's lanes 0..3 of each), and the same
// load shifted right by 4 gives elements 16..31 (lanes 4..7): every
// contract lane of 4 rows from one load, and the activation half-blocks
// are 16-byte broadcasts straight from their Q8_0 blocks.
#ifndef EDGELLM_MATVEC_Q4X4_H
#define EDGELLM_MATVEC_Q4X4_H
#include <stddef.h>
#include <stdint.h>

// emv_q4x4_available reports whether this CPU runs the q4x4 kernel
// (AVX-512 F/BW/VL/DQ + VNNI).
int emv_q4x4_available(void);

// emv_q4x4_group_bytes is the size of one group of 4 rows of k elements.
size_t emv_q4x4_group_bytes(int64_t k);

// emv_q4x4_size is the size of the q4x4 copy of rows x k Q4_0 weights.
size_t emv_q4x4_size(int64_t rows, int64_t k);

// emv_q4x4_pack writes the q4x4 copy of rows [g0*4, g1*4) (groups g0..g1-1)
// of the plain Q4_0 matrix w (rows ws bytes apart, rows in all) into dst,
// which holds the whole matrix's layout (emv_q4x4_size bytes). Returns 0 or
// -1 on bad arguments.
int emv_q4x4_pack(const void *w, size_t ws, int64_t rows, int64_t k, int64_t g0, int64_t g1, void *dst);

// emv_q4x4_matvec is emv_matvec on the q4x4 copy p of a rows x k Q4_0
// matrix: y[j*ldy + r] for r in [r0, r1), j in [0, n); a holds n Q8_0 rows
// astride bytes apart. Returns 0, -1 on bad arguments, or -2 when this CPU
// lacks the instructions or the per-thread scratch cannot be had (nothing
// written; the caller runs the plain-block kernel).
int emv_q4x4_matvec(const void *p, int64_t rows, int64_t k, int64_t r0, int64_t r1, const void *a, size_t astride,
                    int64_t n, float *y, size_t ldy);

// emv_q4x4_matvec_split is emv_q4x4_matvec over every row, computed by the
// nth threads of a pool together, thread ith calling it: the rows are
// shared through split (EMV_SPLIT_BYTES of zeroed memory per graph node,
// emv_split.h), so a slower thread leaves its share's tail to the others.
// The same bits as any static split. Returns the number of 16-row units
// this thread computed (>= 0), -1 on bad arguments, or -2
// where it does not apply (n > 8, more than EMV_SPLIT_MAX threads, the AVX2
// kernel, no VNNI): split is untouched and the caller splits statically.
// Every thread of the call gets the same answer for the same arguments.
int emv_q4x4_matvec_split(const void *p, int64_t rows, int64_t k, const void *a, size_t astride, int64_t n, float *y,
                          size_t ldy, void *split, int ith, int nth);
#endif
