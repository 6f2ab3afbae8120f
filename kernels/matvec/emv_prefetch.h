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

// EMV_PF_TARGET: a target attribute for the helpers below, for a file whose
// kernels carry a target attribute that may lack some of the build's
// -march features (GCC then refuses to inline a helper with the build's
// options; matvec_arm64.c). Empty by default.
#ifndef EMV_PF_TARGET
#define EMV_PF_TARGET
#endif

// emv_pf_off: nonzero turns every kernel's software prefetch off (a
// measurement switch for one-process before/after ratios, SetPrefetch in
// tests and benchmarks; prefetch never changes a result). Defined in
// matvec.c.
extern int emv_pf_off;

// emv_pf: bytes [p, end) prefetched in steps of step bytes (a multiple of
// the 64-byte line), one step per emv_pf_step call.
typedef struct {
	const uint8_t *p, *end;
	size_t step;
} emv_pf;

// emv_pf_init: the next stretch starts at next and is bytes long, clipped
// at limit (the end of what this call may read); it is spread over steps
// calls, line by line from the line holding next. A stretch past limit
// prefetches nothing.
static inline __attribute__((always_inline)) EMV_PF_TARGET emv_pf emv_pf_init(const uint8_t *next, size_t bytes,
                                                                const uint8_t *limit, int steps) {
	emv_pf pf;
	pf.p = (const uint8_t *)((uintptr_t)next & ~(uintptr_t)63); // the line holding next
	pf.end = emv_pf_off || (uintptr_t)next >= (uintptr_t)limit ? pf.p
	         : (size_t)(limit - next) < bytes                  ? limit
	                                                           : next + bytes;
	size_t span = (size_t)(pf.end - pf.p);
	pf.step = ((span + (size_t)steps - 1) / (size_t)steps + 63) & ~(size_t)63;
	return pf;
}

// emv_pf_rows: the stretch after a pass over rows [r, r+R) of a row-major
// matrix (row r at w + r*ws, rowb bytes of it read), i.e. rows [r+R, r+2R),
// clipped at the end of row r1-1 (the last row this call reads); spread
// over steps calls.
static inline __attribute__((always_inline)) EMV_PF_TARGET emv_pf emv_pf_rows(const uint8_t *w, size_t ws, size_t rowb, int64_t r,
                                                                int R, int64_t r1, int steps) {
	return emv_pf_init(w + (size_t)(r + R) * ws, (size_t)R * ws, w + (size_t)(r1 - 1) * ws + rowb, steps);
}

// emv_pf_range: step i's bytes [*q, *e); 0 when it has none.
static inline __attribute__((always_inline)) EMV_PF_TARGET int emv_pf_range(const emv_pf *pf, int i, const uint8_t **q,
                                                              const uint8_t **e) {
	*q = pf->p + (size_t)i * pf->step;
	if ((uintptr_t)*q >= (uintptr_t)pf->end) return 0;
	*e = (size_t)(pf->end - *q) < pf->step ? pf->end : *q + pf->step;
	return 1;
}

// emv_pf_step: step i's lines, into L2 (locality 2: prefetcht1 on x86).
static inline __attribute__((always_inline)) EMV_PF_TARGET void emv_pf_step(const emv_pf *pf, int i) {
	const uint8_t *q, *e;
	if (!emv_pf_range(pf, i, &q, &e)) return;
	for (; q < e; q += 64) __builtin_prefetch(q, 0, 2);
}

#endif
