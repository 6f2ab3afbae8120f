package main

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestRunRepack: run --repack on both engines reports the anonymous memory
// it costs on stderr, and the two engines, both repacked, generate the same
// greedy text (they run the same kernels on the same repacked matrices:
// internal/native TestParityRepacked). On an F32 model nothing is eligible:
// said on stderr, not an error.
func TestRunRepack(t *testing.T) {
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 {
		t.Skip("no AVX2: ggml has no repacked Q4_0 kernel on this CPU")
	}
	q4 := filepath.Join(sharedtest.Path(t, "models/derived"), "stories260K-ff192-Q4_0.gguf")
	f32 := sharedtest.Stories260K(t)
	tests := []struct {
		name, model, engine, wantErr string
	}{
		{"native q4_0", q4, "native", "matrices copied into repacked layouts"},
		{"llamacpp q4_0", q4, "llamacpp", "matrices copied into repacked layouts"},
		{"native f32", f32, "native", "nothing to repack"},
		{"llamacpp f32", f32, "llamacpp", "nothing to repack"},
	}
	texts := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCLI(t, "run", "-m", tc.model, "-n", "48", "--temp", "0", "--threads", "1", "--engine", tc.engine, "--repack")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !strings.Contains(errs, "repack: ") || !strings.Contains(errs, tc.wantErr) {
				t.Fatalf("stderr lacks %q:\n%s", tc.wantErr, errs)
			}
			if tc.model == q4 && strings.Contains(errs, " 0.0 MiB") {
				t.Errorf("repacked 0 MiB:\n%s", errs)
			}
			texts[tc.name] = out
		})
	}
	if a, b := texts["native q4_0"], texts["llamacpp q4_0"]; a == "" || a != b {
		t.Errorf("repacked engines differ:\nnative   %q\nllamacpp %q", a, b)
	}
}
