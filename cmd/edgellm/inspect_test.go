package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

func TestInspectStories260K(t *testing.T) {
	path := sharedtest.Stories260K(t)
	out, errs, code := runCLI(t, "inspect", "--json", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r inspectReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	hp := map[string]any{}
	for _, kv := range r.HParams {
		hp[kv.Key] = kv.Value
	}
	want := map[string]float64{"llama.block_count": 5, "llama.embedding_length": 64, "llama.attention.head_count": 8,
		"llama.attention.head_count_kv": 4, "llama.context_length": 2048, "llama.feed_forward_length": 172}
	for k, w := range want {
		if v, ok := hp[k].(float64); !ok || v != w {
			t.Errorf("%s = %v, want %v", k, hp[k], w)
		}
	}
	if r.Version != 3 || r.Architecture != "llama" || r.Tokenizer.VocabSize != 512 || r.Tokenizer.Model != "llama" ||
		r.Tokenizer.BOS == nil || *r.Tokenizer.BOS != 1 || r.Tokenizer.EOS == nil || *r.Tokenizer.EOS != 2 {
		t.Errorf("header/tokenizer: %+v %+v", r, r.Tokenizer)
	}
	if len(r.Tensors) != 48 || len(r.Types) != 1 || r.Types[0].Type != "F32" || r.Types[0].Count != 48 {
		t.Fatalf("tensors %d, types %+v", len(r.Tensors), r.Types)
	}
	// stories260K has 260K parameters: elements = F32 bytes / 4.
	if r.Params*4 != r.TensorBytes || r.Params < 250000 || r.Params > 300000 {
		t.Errorf("params %d, tensor bytes %d", r.Params, r.TensorBytes)
	}
	last := r.Tensors[len(r.Tensors)-1]
	if last.Offset+last.Bytes != r.FileSize {
		t.Errorf("last tensor ends at %d, file %d", last.Offset+last.Bytes, r.FileSize)
	}

	text, _, code := runCLI(t, "inspect", path)
	for _, s := range []string{"version 3", "block_count", "vocab size", "512", "token_embd.weight", "[64 512]", "F32", "parameters"} {
		if code != 0 || !strings.Contains(text, s) {
			t.Errorf("text output lacks %q (exit %d)", s, code)
		}
	}
}

func TestInspectV1(t *testing.T) {
	out, errs, code := runCLI(t, "inspect", "--json", sharedtest.Path(t, "models/tinyllamas-stories-260k-f32.v1.gguf"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r inspectReport
	json.Unmarshal([]byte(out), &r)
	if r.Version != 1 || len(r.Tensors) != 48 || r.Tokenizer.VocabSize != 512 {
		t.Errorf("v1: version %d, %d tensors, vocab %d", r.Version, len(r.Tensors), r.Tokenizer.VocabSize)
	}
}

func TestInspectBadInput(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "x.bin")
	os.WriteFile(notGGUF, []byte("definitely not a model file"), 0o644)
	real, _ := os.ReadFile(sharedtest.Stories260K(t))
	trunc := filepath.Join(dir, "trunc.gguf")
	os.WriteFile(trunc, real[:3000], 0o644)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"missing", []string{"inspect", filepath.Join(dir, "nope.gguf")}, 1, "no such file"},
		{"not gguf", []string{"inspect", notGGUF}, 1, "bad magic"},
		{"truncated", []string{"inspect", trunc}, 1, "truncated"},
		{"no arg", []string{"inspect"}, 2, "one MODEL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCLI(t, tc.args...)
			if code != tc.code || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.msg) {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
		})
	}
}
