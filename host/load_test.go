package host

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

func TestLoadChoosesEngine(t *testing.T) {
	model := sharedtest.Stories260K(t)
	q8 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf")
	q4 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q4_0.gguf")
	vocab := sharedtest.Path(t, "models/vocab/ggml-vocab-gpt-2.gguf")
	tests := []struct {
		name       string
		path       string
		opts       LoadOptions
		wantEngine string // "" = want an error containing wantErr
		wantErr    string
		wantNotice string
	}{
		{"auto on llama is native", model, LoadOptions{}, "native", "", ""},
		{"llamacpp on request", model, LoadOptions{Engine: "llamacpp"}, "llamacpp", "", ""},
		{"native on request", model, LoadOptions{Engine: "native"}, "native", "", ""},
		{"ladder runs on native", "", LoadOptions{Tiers: []string{q8, q4}}, "native", "", ""},
		{"native ladder on request", "", LoadOptions{Engine: "native", Tiers: []string{q8, q4}, StartTier: 1}, "native", "", ""},
		{"llamacpp ladder on request", "", LoadOptions{Engine: "llamacpp", Tiers: []string{q8, q4}}, "llamacpp", "", ""},
		{"no-mmap ladder falls back", "", LoadOptions{NoMmap: true, Tiers: []string{q8, q4}}, "llamacpp", "", "LoadOptions.NoMmap"},
		// stories260K and its ff192 derivative pass the llamacpp ladder's
		// check (same KV shape) but differ in n_ff: not one set of weights.
		{"ladder native cannot map falls back", "", LoadOptions{Tiers: []string{q8, model}}, "llamacpp", "", "cannot run this tier ladder"},
		{"native ladder it cannot map refused", "", LoadOptions{Engine: "native", Tiers: []string{q8, model}}, "", "n_ff", ""},
		{"tiers and layer sets refused", "", LoadOptions{Tiers: []string{q8, q4}, LayerSets: []string{q4}}, "", "LoadOptions.LayerSets", ""},
		{"no-mmap falls back", model, LoadOptions{NoMmap: true}, "llamacpp", "", "LoadOptions.NoMmap"},
		{"native no-mmap refused", model, LoadOptions{Engine: "native", NoMmap: true}, "", "always maps", ""},
		{"vocab only", vocab, LoadOptions{}, "", "vocabulary-only", ""},
		{"missing file", filepath.Join(t.TempDir(), "x.gguf"), LoadOptions{}, "", "x.gguf", ""},
		{"unknown engine", model, LoadOptions{Engine: "gpu"}, "", "unknown engine", ""},
		{"start tier out of range", "", LoadOptions{Tiers: []string{q8, model}, StartTier: 2}, "", "start tier", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var notices bytes.Buffer
			tt.opts.Notices = &notices
			e, err := Load(tt.path, tt.opts)
			if tt.wantEngine == "" {
				if err == nil {
					e.Close()
					t.Fatal("loaded; want an error")
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if e.Name() != tt.wantEngine {
				t.Fatalf("engine %s, want %s", e.Name(), tt.wantEngine)
			}
			if !strings.Contains(notices.String(), tt.wantNotice) {
				t.Fatalf("notices %q, want %q", notices.String(), tt.wantNotice)
			}
		})
	}
}
