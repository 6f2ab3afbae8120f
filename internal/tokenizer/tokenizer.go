// Package tokenizer adapts llama.cpp's tokenizer (kernels.Vocab) to the
// engine.Vocab interface. Both engines use it: tokenizing is not the forward
// pass's job, and llama.cpp's tokenizer is the reference (it reproduces
// llama.cpp's own test vectors, see kernels/tokenizer_test.go).
//
// A Vocab is safe for concurrent use as far as kernels.Vocab is; it is valid
// while the kernels.Model it came from is open.
package tokenizer

import (
	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// Vocab implements engine.Vocab over a kernels.Vocab. Special tokens in text
// are not parsed (a prompt cannot inject control tokens); pieces of special
// tokens render as empty.
type Vocab struct{ V *kernels.Vocab }

var _ engine.Vocab = Vocab{}

// Tokenize converts text to tokens, adding BOS when addSpecial is set.
func (v Vocab) Tokenize(text string, addSpecial bool) ([]int32, error) {
	return v.V.Tokenize(text, addSpecial, false)
}

// TokenizeSpecial is Tokenize with special-token text ("<|im_start|>")
// parsed into its token: for text the server wrote (a chat template's),
// never for a user's.
func (v Vocab) TokenizeSpecial(text string, addSpecial bool) ([]int32, error) {
	return v.V.Tokenize(text, addSpecial, true)
}

// Piece appends the text of tok to dst; an invalid token appends nothing.
func (v Vocab) Piece(dst []byte, tok int32) []byte {
	out, err := v.V.Piece(dst, tok, false)
	if err != nil {
		return dst
	}
	return out
}

func (v Vocab) BOS() int32           { return v.V.BOS() }
func (v Vocab) EOS() int32           { return v.V.EOS() }
func (v Vocab) IsEOG(tok int32) bool { return v.V.IsEOG(tok) }
func (v Vocab) NVocab() int          { return v.V.NVocab() }
