// matvec_q4x4_avx2.h: the q4x4 kernel for AVX2 CPUs (matvec_q4x4_avx2.c),
// on the same layout and contract as the AVX-512 VNNI one (matvec_q4x4.h).
#ifndef EDGELLM_MATVEC_Q4X4_AVX2_H
#define EDGELLM_MATVEC_Q4X4_AVX2_H
#include <stddef.h>
#include <stdint.h>

// emv_q4x4_avx2_available reports AVX2 + FMA + F16C.
int emv_q4x4_avx2_available(void);

// emv_q4x4_avxvnni_available reports AVX2 + FMA + F16C + AVX-VNNI (the
// kernel then takes vpdpbusd ymm for its int32 lanes: the same integers).
int emv_q4x4_avxvnni_available(void);

// emv_q4x4_usable reports whether either q4x4 kernel runs on this CPU.
int emv_q4x4_usable(void);

// emv_q4x4_avx2_selected reports whether emv_q4x4_matvec runs the AVX2
// kernel: on CPUs without AVX-512 VNNI, or when a test forced it.
int emv_q4x4_avx2_selected(void);

// emv_q4x4_force_avx2 (tests only): mode 1 makes emv_q4x4_matvec run the
// AVX2 kernel with maddubs+madd lanes where AVX2 is present, mode 2 the
// same with AVX-VNNI lanes where that is present (else mode 1's), whatever
// else the CPU has; 0 restores the run-time choice.
void emv_q4x4_force_avx2(int mode);

// emv_q4x4_matvec_avx2 is emv_q4x4_matvec (same arguments and results)
// with the AVX2 kernel.
int emv_q4x4_matvec_avx2(const void *p, int64_t rows, int64_t k, int64_t r0, int64_t r1, const void *a,
                         size_t astride, int64_t n, float *y, size_t ldy);
#endif
