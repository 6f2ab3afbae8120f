package main

import (
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestBenchWarmStart: bench --warm-start runs one whole process per
// --willneed-layers value from a page cache it emptied (the "file cold"
// column is 100%: the drop worked), and reports a first-token time and a
// peak RSS for each.
func TestBenchWarmStart(t *testing.T) {
	out, errs, code := runCLI(t, "bench", "--warm-start", "-m", sharedtest.Stories260K(t), "-r", "1", "-t", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+len(warmValues) {
		t.Fatalf("want a header and %d rows:\n%s", len(warmValues), out)
	}
	for i, v := range warmValues {
		f := strings.Fields(lines[i+1])
		if len(f) != 6 || f[0] != v || f[5] != "100%" || f[1] == "0.0" || f[4] == "0.0" {
			t.Errorf("row %q: want %s, a first-token time, a peak RSS and 100%% cold", lines[i+1], v)
		}
	}
}
