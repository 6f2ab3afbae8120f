// Software prefetch of the next stretch of a weight stream, spread over the
// steps of the current one. A kernel that reads a few short streams at once
// (q4x4: 4 groups of ~4.6 KB at k = 2048) leaves the hardware prefetchers
// no room to ramp up; prefetching the next pass's bytes into L2 while this
// pass computes made 1B decode ~1.3x faster at 1 and 2 threads (RATIONALE
// "Software prefetch"). Header-only, any architecture.
#ifndef EDGELLM_EMV_PREFETCH_H
#define EDGELLM_EMV_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

// emv_pf: bytes [p, end) prefetched in steps of step bytes (a multiple of
// the 64-byte line), one step per emv_pf_step call.
typedef struct {
	const uint8_t *p, *end;
	size_t step;
} emv_pf;

// emv_pf_init: the next stretch starts at next and is bytes long, clipped
// at limit (the end of what this call may read); it is spread over steps
// calls. A stretch past limit prefetches nothing.
static inline __attribute__((always_inline)) emv_pf emv_pf_init(const uint8_t *next, size_t bytes,
                                                                const uint8_t *limit, int steps) {
	emv_pf pf;
	pf.p = next;
	pf.end = (uintptr_t)next >= (uintptr_t)limit ? next
	         : (size_t)(limit - next) < bytes   ? limit
	                                            : next + bytes;
	pf.step = ((bytes + (size_t)steps - 1) / (size_t)steps + 63) & ~(size_t)63;
	return pf;
}

// emv_pf_range: step i's bytes [*q, *e); 0 when it has none.
static inline __attribute__((always_inline)) int emv_pf_range(const emv_pf *pf, int i, const uint8_t **q,
                                                              const uint8_t **e) {
	*q = pf->p + (size_t)i * pf->step;
	if ((uintptr_t)*q >= (uintptr_t)pf->end) return 0;
	*e = (size_t)(pf->end - *q) < pf->step ? pf->end : *q + pf->step;
	return 1;
}

// emv_pf_step: step i's lines, into L2 (locality 2: prefetcht1 on x86).
static inline __attribute__((always_inline)) void emv_pf_step(const emv_pf *pf, int i) {
	const uint8_t *q, *e;
	if (!emv_pf_range(pf, i, &q, &e)) return;
	for (; q < e; q += 64) __builtin_prefetch(q, 0, 2);
}

#endif
