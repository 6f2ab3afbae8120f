package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

func TestQuantizeCommand(t *testing.T) {
	in := sharedtest.Path(t, "models/derived/stories260K-ff192-f32.gguf")
	out := filepath.Join(t.TempDir(), "q.gguf")
	stdout, stderr, code := runCLI(t, "quantize", "--threads", "1", in, out, "Q8_0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want empty", stdout)
	}
	// One progress line per tensor, numbered 1..n, then the summary.
	lines := regexp.MustCompile(`(?m)^\[ *(\d+)/(\d+)\] \S+$`).FindAllStringSubmatch(stderr, -1)
	if len(lines) == 0 || lines[0][1] != "1" || lines[len(lines)-1][1] != lines[0][2] {
		t.Fatalf("progress lines %v in\n%s", lines, stderr)
	}
	if !strings.Contains(stderr, "quantized "+in) || !strings.Contains(stderr, "Q8_0") {
		t.Errorf("no summary in\n%s", stderr)
	}
	m, err := kernels.LoadModel(out, kernels.ModelParams{VocabOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if ft := m.FileType(); ft != kernels.FileTypeQ8_0 {
		t.Errorf("output file type %v", ft)
	}
}

func TestQuantizeCommandErrors(t *testing.T) {
	in := sharedtest.Path(t, "models/derived/stories260K-ff192-f32.gguf")
	dir := t.TempDir()
	notModel := filepath.Join(dir, "notes.txt")
	os.WriteFile(notModel, []byte("this is not a model, just text\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // all in stderr
	}{
		{"no-args", nil, 2, []string{"want IN OUT TYPE", "q4_k_m"}},
		{"unknown-type", []string{in, filepath.Join(dir, "o.gguf"), "q9_9"}, 2, []string{`TYPE "q9_9"`, "q4_k_m", "q8_0", "q5_k_s"}},
		{"missing-in", []string{filepath.Join(dir, "none.gguf"), filepath.Join(dir, "o.gguf"), "q8_0"}, 1, []string{"IN", "none.gguf", "no such file"}},
		{"not-gguf", []string{notModel, filepath.Join(dir, "o.gguf"), "q8_0"}, 1, []string{"notes.txt", "not a GGUF file"}},
		{"out-not-writable", []string{in, filepath.Join(dir, "missing-dir", "o.gguf"), "q8_0"}, 1, []string{"o.gguf", "not writable"}},
		{"bad-threads", []string{"--threads", "-2", in, filepath.Join(dir, "o.gguf"), "q8_0"}, 2, []string{"--threads"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, append([]string{"quantize"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q", stdout)
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); n != 0 {
				t.Errorf("error is %d lines:\n%s", n+1, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "o.gguf")); err == nil {
		t.Error("a failed quantize left its output")
	}
}

// TestQuantizeRowsNotBlocks: rows that are not a multiple of the block
// (stories260K's FFN of 172) fail with the tensor and the rule named, not
// llama.cpp's bare "Unsupported tensor size encountered".
func TestQuantizeRowsNotBlocks(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o.gguf")
	_, stderr, code := runCLI(t, "quantize", sharedtest.Stories260K(t), out, "q4_0")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	for _, w := range []string{"blk.0.ffn_down.weight", "rows of 172", "blocks of 32"} {
		if code != 1 || !strings.Contains(last, w) {
			t.Fatalf("exit %d, last line %q: want exit 1 and %q", code, last, w)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed quantize left its output")
	}
}
