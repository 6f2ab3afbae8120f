package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

func TestSynthTinyThenInspect(t *testing.T) {
	vocab := sharedtest.Path(t, "models/vocab/ggml-vocab-llama-spm.gguf")
	out := filepath.Join(t.TempDir(), "m.gguf")
	stdout, errs, code := runCLI(t, "synth", "--shape", "tiny", "--type", "q8_0", "--n-layer", "2", "--vocab", vocab, "--seed", "5", "-o", out)
	if code != 0 || stdout != "" || !strings.Contains(errs, "SYNTHETIC") || !strings.Contains(errs, "MB/s") {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, errs)
	}
	js, errs, code := runCLI(t, "inspect", "--json", out)
	if code != 0 {
		t.Fatalf("inspect: %s", errs)
	}
	var r inspectReport
	json.Unmarshal([]byte(js), &r)
	if len(r.Tensors) != 2*9+3 || r.Tokenizer.VocabSize != 32000 || !strings.Contains(r.Name, "synth") {
		t.Errorf("%d tensors, vocab %d, name %q", len(r.Tensors), r.Tokenizer.VocabSize, r.Name)
	}
}

func TestSynthBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"synth", "--shape", "nope", "-o", "x"}, "unknown"},
		{[]string{"synth", "--type", "q9_9", "-o", "x"}, "unknown tensor type"},
		{[]string{"synth", "--type", "q4_k", "--n-embd", "96", "-o", "x"}, "block size 256"},
		{[]string{"synth"}, "--out"},
	}
	for _, tc := range tests {
		_, errs, code := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.msg) {
			t.Errorf("%v: exit %d, %s", tc.args, code, errs)
		}
	}
}
