// The memory read-bandwidth probe (bwprobe.c): wide loads into independent
// accumulators, one contiguous slice per thread, threads released together.
#ifndef EDGELLM_BWPROBE_H
#define EDGELLM_BWPROBE_H

#include <stddef.h>
#include <stdint.h>

// Implementations, slowest first.
enum { BWP_SCALAR = 0, BWP_AVX2 = 1, BWP_AVX512 = 2, BWP_NEON = 3, BWP_NIMPL = 4 };

// bwp_best_impl is the widest implementation this CPU runs (cpuid on x86-64;
// NEON is baseline on arm64).
int bwp_best_impl(void);

// bwp_impl_available reports whether this CPU runs impl.
int bwp_impl_available(int impl);

// bwp_split sets [*lo, *hi) to thread t's slice of `words` 8-byte words
// split over `threads` readers: contiguous, in order, every boundary but the
// last a multiple of 8 words (one 64-byte line).
void bwp_split(size_t words, int threads, int t, size_t *lo, size_t *hi);

// bwp_read reads buf[0 .. words) with `threads` readers (the calling thread
// is reader 0) using impl. The readers are started and waiting before the
// clock starts, released together, and *seconds is the wall time from the
// release until the last reader finishes. *sum is the wrapping sum of every
// word (so every byte is read). Returns 0, or -1 if impl is not available or
// a thread cannot be started.
int bwp_read(int impl, const uint64_t *buf, size_t words, int threads,
             double *seconds, uint64_t *sum);

// bwp_alloc returns a 64-byte-aligned buffer of `bytes` (a multiple of
// 4096), filled with words[i] = i and backed by transparent huge pages where
// the kernel allows, or NULL; bwp_free releases it.
uint64_t *bwp_alloc(size_t bytes);
void bwp_free(uint64_t *buf, size_t bytes);

#endif
