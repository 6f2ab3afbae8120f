package main

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestCAPIContextFits (#32 point 4): the C API follows the one context
// rule (host.SessionConfig.Fit) on both engines: on a model trained on 128
// positions n_ctx 0 is 128 (not the default 2048, which does not fit), and
// n_ctx 256 is EDGELLM_ERR_INVALID_ARGUMENT with a message naming 256 and
// 128.
func TestCAPIContextFits(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the C test links a Linux shared library")
	}
	model := filepath.Join(t.TempDir(), "ctx128.gguf")
	if err := gguf.Rewrite(sharedtest.Stories260K(t), model, func(kv []gguf.KV) []gguf.KV {
		for i := range kv {
			if kv[i].Key == "llama.context_length" {
				kv[i].Value = gguf.Uint32(128)
			}
		}
		return kv
	}); err != nil {
		t.Fatal(err)
	}
	dir := libDir(t)
	prog := filepath.Join(t.TempDir(), "ctxfit")
	run(t, "", "gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I", "../../include",
		"testdata/ctxfit.c", "-o", prog, "-L", dir, "-ledgellm", "-Wl,-rpath,"+dir)
	for _, engine := range []string{"native", "llamacpp"} {
		out := run(t, "", prog, model, engine)
		t.Logf("%s:\n%s", engine, out)
		if !strings.Contains(out, "n_ctx 0 -> 128 (trained on 128)") {
			t.Errorf("%s: n_ctx 0 is not the model's 128:\n%s", engine, out)
		}
		if !strings.Contains(out, "n_ctx 256 -> status 1: ") || !strings.Contains(out, "context 256 is above the training context 128") {
			t.Errorf("%s: n_ctx 256 is not refused naming 256 and 128:\n%s", engine, out)
		}
	}
}
