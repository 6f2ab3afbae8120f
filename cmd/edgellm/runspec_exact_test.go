package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestRunDraftNearTie (#31 point 2): issue 31's repro through the CLI.
// With --kernels edgellm, run --draft ngram --spec-k 1 prints plain
// decoding's 256 tokens and no exactness warning; with ggml's kernels (the
// default) it warns once that the F32 matrices are not batch-invariant and
// that --kernels edgellm fixes it.
func TestRunDraftNearTie(t *testing.T) {
	m := filepath.Join(sharedtest.Path(t, "models/derived"), "stories260K-ff192-f32.gguf")
	base := []string{"run", "-m", m, "--temp", "0", "-n", "256", "-p", "Tom and Sam went to the park. They",
		"--window", "48", "--anchors", "4", "--threads", "1"}
	const warn = "greedy text may differ from plain decoding"
	own := append(append([]string(nil), base...), "--kernels", "edgellm")
	plain, errs, code := runCLI(t, own...)
	if code != 0 {
		t.Fatalf("plain: exit %d: %s", code, errs)
	}
	spec, errs, code := runCLI(t, append(own, "--draft", "ngram", "--spec-k", "1")...)
	if code != 0 {
		t.Fatalf("--draft: exit %d: %s", code, errs)
	}
	if spec != plain {
		t.Fatalf("--kernels edgellm: speculative text differs from plain:\n%q\n%q", spec, plain)
	}
	if strings.Contains(errs, warn) {
		t.Fatalf("--kernels edgellm: exactness warning: %s", errs)
	}
	_, errs, code = runCLI(t, append(base, "--draft", "ngram", "--spec-k", "1")...)
	if code != 0 {
		t.Fatalf("ggml --draft: exit %d: %s", code, errs)
	}
	if strings.Count(errs, warn) != 1 || !strings.Contains(errs, "f32 matrices") || !strings.Contains(errs, "--kernels edgellm makes it exact") {
		t.Fatalf("ggml kernels: want one warning naming the f32 matrices and the fix: %s", errs)
	}
}
