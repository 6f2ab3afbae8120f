package native

import (
	"errors"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// greedy decodes n tokens from prompt and returns them.
func greedy(t testing.TB, s engine.Session, prompt []int32, n, nVocab int) []int32 {
	t.Helper()
	logits := make([]float32, nVocab)
	var out []int32
	toks := prompt
	for range n {
		if err := s.Decode(toks, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if err := s.Logits(len(toks)-1, logits); err != nil {
			t.Fatal(err)
		}
		tok := kernels.Argmax(logits)
		out = append(out, tok)
		toks = out[len(out)-1:]
	}
	return out
}

// TestGreedyStories260K: the golden greedy text of stories260K from BOS
// (models/README.md), for every KV type and both attention paths.
func TestGreedyStories260K(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{Threads: 1, NoVocab: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pieces, err := e.Weights().File.GetStringArray("tokenizer.ggml.tokens")
	if err != nil {
		t.Fatal(err)
	}
	const want = "Once upon a time, there was a little girl named Lily."
	tests := []struct {
		kv    engine.KVType
		flash bool
		n     int // tokens that must match the golden text
	}{
		{engine.KVF32, false, 64}, {engine.KVF16, false, 64}, {engine.KVF16, true, 64},
		{engine.KVQ8_0, false, 16}, {engine.KVQ8_0, true, 16},
	}
	for _, tc := range tests {
		name := string(tc.kv)
		if tc.flash {
			name += "-flash"
		}
		t.Run(name, func(t *testing.T) {
			s, err := e.NewSession(engine.SessionConfig{NCtx: 256, KVType: tc.kv, Attention: att(tc.flash)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			toks := greedy(t, s, []int32{1}, 24, e.Config().NVocab) // 1 = BOS
			// SentencePiece pieces: "▁" is a space (enough for this text).
			var text strings.Builder
			for _, tok := range toks {
				text.WriteString(strings.ReplaceAll(pieces[tok], "\u2581", " "))
			}
			got := strings.TrimSpace(text.String())
			if !strings.HasPrefix(got, want) {
				t.Fatalf("greedy text %q, want prefix %q", got, want)
			}
			if s.Len() != 24 {
				t.Fatalf("Len = %d", s.Len())
			}
		})
	}
}

// TestBatchEqualsSequential: prefill as one batch with all logits gives the
// same logits as token-by-token decode (prefill and verify are one graph).
func TestBatchEqualsSequential(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{Threads: 1, NoVocab: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	toks := []int32{1, 403, 407, 261, 378, 414, 270, 262}
	nv := e.Config().NVocab
	a, _ := e.NewSession(engine.SessionConfig{NCtx: 64})
	defer a.Close()
	b, _ := e.NewSession(engine.SessionConfig{NCtx: 64})
	defer b.Close()
	if err := a.Decode(toks, engine.LogitsAll); err != nil {
		t.Fatal(err)
	}
	la, lb := make([]float32, nv), make([]float32, nv)
	for i, tok := range toks {
		if err := b.Decode([]int32{tok}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		a.Logits(i, la)
		b.Logits(0, lb)
		// Relative to the logits' range, top-1 kept (sharedtest.LogitsRelTol
		// says why): batch and single-token paths sum in different orders.
		if err := sharedtest.CompareLogits(la, lb); err != nil {
			t.Fatalf("token %d, batch against sequential: %v", i, err)
		}
	}
	// Truncate (rollback) then re-decode gives the same logits again.
	if err := a.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if err := a.Decode(toks[5:7], engine.LogitsAll); err != nil {
		t.Fatal(err)
	}
	if err := a.Logits(1, la); err != nil {
		t.Fatal(err)
	}
	b.Truncate(7)
	b.Truncate(6)
	b.Decode(toks[6:7], engine.LogitsLast)
	b.Logits(0, lb)
	if err := sharedtest.CompareLogits(la, lb); err != nil {
		t.Fatalf("after truncate: %v", err)
	}
	if err := a.Logits(0, la); err != nil {
		t.Fatal(err)
	}
	a.Decode(toks[:2], engine.LogitsLast)
	if err := a.Logits(0, la); !errors.Is(err, ErrNoLogits) {
		t.Fatalf("Logits(0) after a 2-token LogitsLast batch: %v", err)
	}
	if err := a.Logits(1, la); err != nil {
		t.Fatal(err)
	}
}

// att maps a test's flash flag to the session setting.
func att(flash bool) engine.Attention {
	if flash {
		return engine.AttentionFlash
	}
	return engine.AttentionClassic
}
