package host

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/synth"
)

// TestLoadAutoFamilies: --engine auto runs every family the native engine
// knows natively and says so; a file of such a family whose metadata the
// native loader refuses falls back to llamacpp with the reason.
func TestLoadAutoFamilies(t *testing.T) {
	vocab := sharedtest.Stories260K(t)
	dir := t.TempDir()
	for _, name := range []string{"qwen2-tiny", "qwen3-tiny", "gemma2-tiny", "gemma3-tiny", "smollm2-tiny"} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name+".gguf")
			if err := synth.Write(context.Background(), synth.Options{Shape: synth.Shapes[name], Type: gguf.Q8_0, VocabPath: vocab, Seed: 1, Out: p}, nil); err != nil {
				t.Fatal(err)
			}
			var notices bytes.Buffer
			e, err := Load(p, LoadOptions{Notices: &notices})
			if err != nil {
				t.Fatal(err)
			}
			e.Close()
			if e.Name() != "native" || !strings.Contains(notices.String(), "engine native") {
				t.Fatalf("engine %s, notices %q; want native, said", e.Name(), notices.String())
			}
			if name != "qwen2-tiny" {
				return
			}
			bad := filepath.Join(dir, "qwen2-logit-scale.gguf")
			if err := gguf.Rewrite(p, bad, func(kv []gguf.KV) []gguf.KV {
				return append(kv, gguf.KV{Key: "qwen2.logit_scale", Value: gguf.Float32(2)})
			}); err != nil {
				t.Fatal(err)
			}
			notices.Reset()
			e, err = Load(bad, LoadOptions{Notices: &notices})
			if err != nil {
				t.Fatal(err)
			}
			e.Close()
			if e.Name() != "llamacpp" || !strings.Contains(notices.String(), "qwen2.logit_scale") {
				t.Fatalf("engine %s, notices %q; want llamacpp and the refused key", e.Name(), notices.String())
			}
		})
	}
}
