package matvec

import "testing"

// TestPrefetchCoversNextPass: the software prefetch touches each line of
// the next pass once, in order, and nothing at or past the caller's limit
// (the end of the groups its thread reads).
func TestPrefetchCoversNextPass(t *testing.T) {
	for _, c := range []struct{ bytes, limit, steps int }{
		{4 * 4608, 1 << 20, 64},  // 4 groups at k = 2048, far from the end
		{4 * 4608, 2 * 4608, 64}, // clipped: only two groups left
		{4608, 4608, 64},         // one group, exactly up to the limit
		{4 * 9216, 1 << 20, 128}, // k = 4096
		{4 * 4608, 0, 64},        // the last pass: nothing after it
		{1 << 10, 1 << 20, 3},    // steps that do not divide the lines
	} {
		want := c.bytes
		if c.limit < want {
			want = c.limit
		}
		got := prefetchLines(c.bytes, c.limit, c.steps)
		if len(got) != (want+63)/64 {
			t.Errorf("%+v: %d lines, want %d", c, len(got), (want+63)/64)
		}
		for i, o := range got {
			if o != int64(64*i) {
				t.Errorf("%+v: line %d at %d, want %d", c, i, o, 64*i)
				break
			}
			if o >= int64(c.limit) {
				t.Errorf("%+v: line at %d, past the limit", c, o)
				break
			}
		}
	}
}

// TestPrefetchRowsCoverNextPass: the row-major kernels' stream (plain
// Q4_0/Q8_0, F32/F16, NEON) after a pass over rows [r, r+R) touches each
// line of rows [r+R, r+2R) once, in order, the line holding the first
// byte included (row starts need not be line-aligned), and nothing past
// the end of row r1-1, the last row the call reads (a padded stride's gap
// after it included).
func TestPrefetchRowsCoverNextPass(t *testing.T) {
	for _, c := range []struct{ ws, rowb, r, R, r1, steps int }{
		{1152, 1152, 0, 4, 4096, 64},     // Q4_0 k = 2048, 4 rows, far from the end
		{2176, 2176, 8, 4, 14, 64},       // Q8_0 k = 2048: only two rows left
		{2176, 2176, 10, 4, 14, 64},      // the last pass: nothing after it
		{54, 54, 3, 1, 100, 3},           // Q4_0 k = 96: unaligned row starts
		{1088, 1088, 5, 2, 9, 34},        // Q8_0 k = 1024, two rows
		{8192 + 256, 8192, 0, 4, 6, 512}, // padded F32 rows, clipped at row 5's data
		{4100, 4096, 2, 1, 4, 256},       // padded, unaligned, one row left
	} {
		start := (c.r + c.R) * c.ws
		end := (c.r + 2*c.R) * c.ws
		if lim := (c.r1-1)*c.ws + c.rowb; lim < end {
			end = lim
		}
		var want []int64
		for l := start / 64 * 64; l < end; l += 64 {
			want = append(want, int64(l))
		}
		got := prefetchRowLines(c.ws, c.rowb, c.r, c.R, c.r1, c.steps)
		if len(got) != len(want) {
			t.Errorf("%+v: %d lines, want %d", c, len(got), len(want))
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%+v: line %d at %d, want %d", c, i, got[i], want[i])
				break
			}
		}
	}
}
