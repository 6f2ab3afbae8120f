package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestSynthFamilyThenRun: `synth --shape gemma2-tiny` (the shape's default
// vocabulary from the shared directory) then `run` with --engine auto: the
// native engine runs it and stderr says which engine and why; `parity`
// agrees with llama.cpp.
func TestSynthFamilyThenRun(t *testing.T) {
	sharedtest.Path(t, "models/vocab/ggml-vocab-llama-spm.gguf") // skips without the shared directory
	out := filepath.Join(t.TempDir(), "g2.gguf")
	if _, errs, code := runCLI(t, "synth", "--shape", "gemma2-tiny", "--type", "q8_0", "-o", out); code != 0 || !strings.Contains(errs, "gemma2") {
		t.Fatalf("synth: exit %d, %s", code, errs)
	}
	_, errs, code := runCLI(t, "run", "-m", out, "-p", "Once upon a time", "-n", "8", "--threads", "1")
	if code != 0 || !strings.Contains(errs, `engine native: architecture "gemma2"`) || !strings.Contains(errs, "engine native]") {
		t.Fatalf("run: exit %d, stderr %s", code, errs)
	}
	stdout, errs, code := runCLI(t, "parity", "-m", out, "-n", "16", "--threads", "1")
	if code != 0 || !strings.Contains(stdout, "top1_agreement 1.0000") {
		t.Fatalf("parity: exit %d, stdout %s, stderr %s", code, stdout, errs)
	}
	stdout, errs, code = runCLI(t, "parity", "-m", out, "-n", "16", "--threads", "1", "--kv-type", "q8_0", "--same-kv")
	if code != 0 || !strings.Contains(stdout, "max_abs_logit_diff 0 ") || !strings.Contains(stdout, "llama.cpp KV q8_0") {
		t.Fatalf("parity --same-kv: exit %d, stdout %s, stderr %s", code, stdout, errs)
	}
}
