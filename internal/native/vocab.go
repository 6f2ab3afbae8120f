package native

import (
	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/tokenizer"
	"github.com/edgellm/edgellm/kernels"
)

// vocab adapts llama.cpp's tokenizer (a vocab-only kernels.Model) to
// engine.Vocab: tokenizing is not the forward pass's job, and llama.cpp's
// tokenizer is the reference.
type vocab struct {
	m *kernels.Model
	tokenizer.Vocab
}

var _ engine.Vocab = (*vocab)(nil)

func loadVocab(path string) (*vocab, error) {
	m, err := kernels.LoadModel(path, kernels.ModelParams{VocabOnly: true})
	if err != nil {
		return nil, err
	}
	return &vocab{m: m, Vocab: tokenizer.Vocab{V: m.Vocab()}}, nil
}

func (v *vocab) Close() error { return v.m.Close() }
