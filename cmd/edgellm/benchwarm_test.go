package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestBenchWarmStart: bench --warm-start runs one whole process per
// --willneed-layers value from a page cache it emptied (the "file cold"
// column is 100%: the drop worked), and reports a first-token time and a
// peak RSS for each. The model is a private copy: the kernel keeps the
// pages of a file another process maps (the shared stories260K, under
// test packages running beside this one), and the column read 0% there.
func TestBenchWarmStart(t *testing.T) {
	src, err := os.ReadFile(sharedtest.Stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "stories260K.gguf")
	if err := os.WriteFile(model, src, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runCLI(t, "bench", "--warm-start", "-m", model, "-r", "1", "-t", "1")
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
