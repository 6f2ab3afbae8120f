package synthtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/synth"
)

// FamilyChatModel writes the F32 SYNTHETIC tiny model of shape name (one of
// TinyFamilies), with its family's vocabulary, chat template and control
// tokens, into a test temp dir, and returns its path and chat family.
func FamilyChatModel(t testing.TB, name string) (string, synth.ChatFamily) {
	t.Helper()
	sh := synth.Shapes[name]
	vocab := sharedtest.Stories260K(t)
	if sh.Vocab != "" {
		vocab = sharedtest.Path(t, sh.Vocab)
	}
	p := filepath.Join(t.TempDir(), name+".gguf")
	if err := synth.Write(context.Background(), synth.Options{Shape: sh, Type: gguf.F32, VocabPath: vocab, Seed: 1, Out: p}, nil); err != nil {
		t.Fatal(err)
	}
	return p, synth.ChatFamilies[sh.Chat]
}
