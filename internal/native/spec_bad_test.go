package native

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/synth"
)

// TestSpecBadInput: each bad draft is a one-line error naming the bad
// value, and the session stays usable.
func TestSpecBadInput(t *testing.T) {
	e := loadSpecTarget(t)
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "draft.gguf")
	if err := os.WriteFile(notGGUF, []byte("this is not a GGUF file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDraft(notGGUF, e); err == nil || !strings.Contains(err.Error(), notGGUF) {
		t.Fatalf("LoadDraft(not GGUF) = %v, want an error naming the file", err)
	} else {
		t.Log(err)
	}
	// A draft with Llama-2's 32000-token vocabulary.
	other := filepath.Join(dir, "other-vocab.gguf")
	sh := synth.Shape{Name: "vocab-test", NEmbd: 32, NLayer: 1, NHead: 4, NHeadKV: 4, NFF: 64, NCtx: 512, RopeBase: 10000, RMSEps: 1e-5}
	if err := synth.Write(context.Background(), synth.Options{Shape: sh, Type: gguf.F32,
		VocabPath: sharedtest.Path(t, "models/vocab/ggml-vocab-llama-spm.gguf"), Seed: 1, Out: other}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDraft(other, e); err == nil || !strings.Contains(err.Error(), "32000") || !strings.Contains(err.Error(), "512") {
		t.Fatalf("LoadDraft(other vocabulary) = %v, want both sizes named", err)
	} else {
		t.Log(err)
	}
	s, err := e.newSession(engine.SessionConfig{NCtx: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	greedy := sample.Params{TopP: 1, RepeatPenalty: 1}
	for _, c := range []struct {
		spec DraftSpec
		want string
	}{
		{DraftSpec{Kind: DraftSkip, N: 5}, "skip:5"},
		{DraftSpec{Kind: DraftSkip, N: 9}, "5 layers"},
		{DraftSpec{Kind: DraftSelf, Type: "q8_0"}, "self:q8_0"},
	} {
		if _, err := NewSpeculator(s, c.spec, greedy, 4); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewSpeculator(%s) = %v, want an error with %q", c.spec, err, c.want)
		} else {
			t.Log(err)
		}
	}
	for _, v := range []string{"", "skip:0", "skip:x", "self:"} {
		if _, err := ParseDraftSpec(v); err == nil {
			t.Errorf("ParseDraftSpec(%q) = nil error", v)
		}
	}
	// K above the maximum is clamped.
	sp, err := NewSpeculator(s, DraftSpec{Kind: DraftNgram}, greedy, 99)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if sp.K() != MaxSpecK {
		t.Fatalf("K = %d after asking 99, want %d", sp.K(), MaxSpecK)
	}
	if got := sp.SetK(-3); got != 0 {
		t.Fatalf("SetK(-3) = %d, want 0", got)
	}
}
