package tokenizer

import (
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

func TestVocabRoundTrip(t *testing.T) {
	m, err := kernels.LoadModel(sharedtest.Stories260K(t), kernels.ModelParams{VocabOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	v := Vocab{V: m.Vocab()}
	toks, err := v.Tokenize("Once upon a time", true)
	if err != nil {
		t.Fatal(err)
	}
	if toks[0] != v.BOS() || v.NVocab() != 512 {
		t.Fatalf("tokens %v, BOS %d, NVocab %d", toks, v.BOS(), v.NVocab())
	}
	var text []byte
	for _, tok := range toks[1:] {
		text = v.Piece(text, tok)
	}
	if string(text) != " Once upon a time" {
		t.Fatalf("pieces %q", text)
	}
	if !v.IsEOG(v.EOS()) {
		t.Fatal("EOS is not end of generation")
	}
	if got := v.Piece([]byte("x"), -1); string(got) != "x" {
		t.Fatalf("invalid token appended %q", got)
	}
	// "<s>" in text is not parsed as a control token.
	toks, _ = v.Tokenize("<s>", false)
	for _, tok := range toks {
		if tok == v.BOS() {
			t.Fatal("prompt text injected a BOS token")
		}
	}
}
