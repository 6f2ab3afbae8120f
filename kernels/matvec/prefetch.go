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

// emv_pf_rows_lines is emv_pf_lines for emv_pf_rows(w, ws, rowb, r, R,
// r1, steps): the prefetched addresses as offsets from w.
static int emv_pf_rows_lines(size_t ws, size_t rowb, long long r, int R, long long r1, int steps, long long *out,
                             int max) {
	const uint8_t *w = (const uint8_t *)(uintptr_t)4096;
	emv_pf pf = emv_pf_rows(w, ws, rowb, r, R, r1, steps);
	int c = 0;
	for (int i = 0; i < steps; i++) {
		const uint8_t *q, *e;
		if (!emv_pf_range(&pf, i, &q, &e)) continue;
		for (; q < e; q += 64)
			if (c < max) out[c++] = (long long)(q - w);
	}
	return c;
}

static void emv_pf_set_off(int off) { emv_pf_off = off; }
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

// prefetchRowLines is prefetchLines for the row-major kernels' stream
// (emv_pf_rows): after a pass over rows [r, r+R) of rows of rowb bytes at
// stride ws, the addresses (offsets from row 0) prefetched, clipped at the
// end of row r1-1.
func prefetchRowLines(ws, rowb, r, R, r1, steps int) []int64 {
	out := make([]C.longlong, R*ws/64+steps+4)
	n := C.emv_pf_rows_lines(C.size_t(ws), C.size_t(rowb), C.longlong(r), C.int(R), C.longlong(r1), C.int(steps),
		&out[0], C.int(len(out)))
	r2 := make([]int64, n)
	for i := range r2 {
		r2[i] = int64(out[i])
	}
	return r2
}

// setPrefetch turns every kernel's software prefetch on or off (on by
// default): for tests and one-process before/after benchmarks, not while
// calls run. Prefetch never changes a result.
func setPrefetch(on bool) {
	off := C.int(1)
	if on {
		off = 0
	}
	C.emv_pf_set_off(off)
}
