package matvec

/*
#include "emv_prefetch.h"

// emv_pf_lines writes the line offsets (from next) that steps 0..steps-1
// of emv_pf_init(next, bytes, next + limit, steps) prefetch into out (at
// most max), and returns their count; the kernels' own prefetch stream,
// computed without touching memory.
static int emv_pf_lines(size_t bytes, size_t limit, int steps, long long *out, int max) {
	const uint8_t *base = (const uint8_t *)(uintptr_t)4096;
	emv_pf pf = emv_pf_init(base, bytes, base + limit, steps);
	int c = 0;
	for (int i = 0; i < steps; i++) {
		const uint8_t *q, *e;
		if (!emv_pf_range(&pf, i, &q, &e)) continue;
		for (; q < e; q += 64)
			if (c < max) out[c++] = (long long)(q - base);
	}
	return c;
}
*/
import "C"

// prefetchLines is the line offsets the kernels' software prefetch
// (emv_prefetch.h) touches for a stretch of bytes after a pass, clipped at
// limit, spread over steps steps: for tests of its bounds.
func prefetchLines(bytes, limit, steps int) []int64 {
	out := make([]C.longlong, bytes/64+steps+2)
	n := C.emv_pf_lines(C.size_t(bytes), C.size_t(limit), C.int(steps), &out[0], C.int(len(out)))
	r := make([]int64, n)
	for i := range r {
		r[i] = int64(out[i])
	}
	return r
}
