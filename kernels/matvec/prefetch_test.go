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
