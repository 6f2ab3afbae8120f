package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

func TestParityCommand(t *testing.T) {
	model := sharedtest.Stories260K(t)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"parity", "-m", model, "-n", "32", "-t", "1", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		N    int     `json:"n"`
		Top1 float64 `json:"top1_agreement"`
		Max  float64 `json:"max_abs_logit_diff"`
		KL   float64 `json:"kl_mean"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("stdout %q: %v", out.String(), err)
	}
	if r.N != 32 || r.Top1 != 1 || r.Max > 0.01 {
		t.Fatalf("parity %+v", r)
	}
}

func TestParityCommandBadArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"kv", []string{"parity", "--kv-type", "q3"}, 2, "kv-type"},
		{"n", []string{"parity", "-n", "0"}, 2, "--n"},
		{"missing", []string{"parity", "-m", "/nonexistent.gguf"}, 1, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.msg) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errb.String(), tc.code, tc.msg)
			}
		})
	}
}
