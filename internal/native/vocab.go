package native

import (
	"github.com/edgellm/edgellm/internal/engine"
	"github.com/edgellm/edgellm/kernels"
)

// vocab adapts llama.cpp's tokenizer (a vocab-only kernels.Model) to
// engine.Vocab: tokenizing is not the forward pass's job, and llama.cpp's
// tokenizer is the reference.
type vocab struct {
	m *kernels.Model
	v *kernels.Vocab
}

var _ engine.Vocab = (*vocab)(nil)

func loadVocab(path string) (*vocab, error) {
	m, err := kernels.LoadModel(path, kernels.ModelParams{VocabOnly: true})
	if err != nil {
		return nil, err
	}
	return &vocab{m: m, v: m.Vocab()}, nil
}

func (v *vocab) Tokenize(text string, addSpecial bool) ([]int32, error) {
	return v.v.Tokenize(text, addSpecial, false)
}

func (v *vocab) Piece(dst []byte, tok int32) []byte {
	out, err := v.v.Piece(dst, tok, false)
	if err != nil {
		return dst
	}
	return out
}

func (v *vocab) BOS() int32           { return v.v.BOS() }
func (v *vocab) EOS() int32           { return v.v.EOS() }
func (v *vocab) IsEOG(tok int32) bool { return v.v.IsEOG(tok) }
func (v *vocab) NVocab() int          { return v.v.NVocab() }
func (v *vocab) Close() error         { return v.m.Close() }
