// Per-thread scratch of the kernels (activation sums and scales prepared
// once per call): one slot per kernel, because a kernel may call another
// (emv_q4x4_matvec runs emv_q4x4_gemm for n > 8) while holding its own.
#ifndef EDGELLM_EMV_SCRATCH_H
#define EDGELLM_EMV_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

enum { EMV_SCRATCH_MATVEC, EMV_SCRATCH_Q4X4, EMV_SCRATCH_Q4X4_GEMM, EMV_SCRATCH_Q4X4_AVX2, EMV_SCRATCH_SLOTS };

// emv_scratch_get returns this thread's slot buffer of at least bytes
// (64-byte aligned; grown, never shrunk), NULL when the allocation fails.
uint8_t *emv_scratch_get(int slot, size_t bytes);

#endif
