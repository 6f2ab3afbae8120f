package llamacpp

import (
	"errors"
	"fmt"
	"os"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/tokenizer"
	"github.com/edgellm/edgellm/kernels"
)

// Options configures Load.
type Options struct {
	// NoMmap reads the weights into anonymous memory instead of mapping them.
	NoMmap bool
	// Repack lets llama.cpp copy eligible weights into repacked layouts
	// (kernels.ModelParams.Repack: anonymous memory, faster kernels); without
	// it they stay in the mmap'd page cache.
	Repack bool
}

// Engine is a llama.cpp model. It implements engine.Engine.
type Engine struct {
	opts  Options
	path  string
	model *kernels.Model
	vocab tokenizer.Vocab
	info  engine.ModelInfo

	sessions int
	tiers    *ladder // non-nil when loaded as a tier ladder
}

var _ engine.Engine = (*Engine)(nil)

// Load loads the model at path.
func Load(path string, opts Options) (*Engine, error) {
	m, err := kernels.LoadModel(path, kernels.ModelParams{NoMmap: opts.NoMmap, Repack: opts.Repack})
	if err != nil {
		return nil, err
	}
	if m.VocabOnly() || m.NLayer() == 0 {
		m.Close()
		return nil, fmt.Errorf("%s: a vocabulary-only file, not a model", path)
	}
	e := &Engine{opts: opts, path: path}
	e.setModel(m)
	return e, nil
}

func (e *Engine) setModel(m *kernels.Model) {
	e.model = m
	e.vocab = tokenizer.Vocab{V: m.Vocab()}
	var size int64
	if st, err := os.Stat(m.Path()); err == nil {
		size = st.Size()
	}
	e.info = engine.ModelInfo{
		Path:        m.Path(),
		Arch:        m.Arch(),
		Name:        m.Name(),
		NVocab:      m.NVocab(),
		NCtxTrain:   m.NCtxTrain(),
		NEmbd:       m.NEmbd(),
		NLayer:      m.NLayer(),
		NHead:       m.NHead(),
		NHeadKV:     m.NHeadKV(),
		FileBytes:   size,
		ParamCount:  m.NParams(),
		FileType:    m.FileType().String(),
		Description: m.Desc(),
	}
	if ff, ok := m.Meta(m.Arch() + ".feed_forward_length"); ok {
		fmt.Sscan(ff, &e.info.NFF)
	}
	e.info.ChatTemplate, _ = m.Meta("tokenizer.chat_template")
	if e.opts.Repack {
		if f, err := gguf.Open(m.Path()); err == nil {
			e.info.RepackTensors, e.info.RepackBytes = repackCost(f)
		}
	}
}

// Name returns "llamacpp".
func (e *Engine) Name() string { return "llamacpp" }

// Info describes the loaded model (the current tier's, for a ladder).
func (e *Engine) Info() engine.ModelInfo { return e.info }

// Vocab returns the model's tokenizer.
func (e *Engine) Vocab() engine.Vocab { return currentVocab{e} }

// currentVocab is the tokenizer of the engine's current model: a tier swap
// replaces the model (and closes the old one with its vocabulary), so a
// Vocab taken before a swap must follow the engine, not the old model.
type currentVocab struct{ e *Engine }

func (v currentVocab) Tokenize(text string, addSpecial bool) ([]int32, error) {
	return v.e.vocab.Tokenize(text, addSpecial)
}
func (v currentVocab) TokenizeSpecial(text string, addSpecial bool) ([]int32, error) {
	return v.e.vocab.TokenizeSpecial(text, addSpecial)
}
func (v currentVocab) Piece(dst []byte, tok int32) []byte { return v.e.vocab.Piece(dst, tok) }
func (v currentVocab) BOS() int32                         { return v.e.vocab.BOS() }
func (v currentVocab) EOS() int32                         { return v.e.vocab.EOS() }
func (v currentVocab) IsEOG(tok int32) bool               { return v.e.vocab.IsEOG(tok) }
func (v currentVocab) NVocab() int                        { return v.e.vocab.NVocab() }

// Model returns the underlying kernels model (the current tier's).
func (e *Engine) Model() *kernels.Model { return e.model }

// Capabilities: no speculative decoding. Tier swaps (with KV migration)
// are what a ladder's Session implements (engine.TierSwapper), thread
// counts what every Session does (public.go).
func (e *Engine) Capabilities() engine.Capabilities { return engine.Capabilities{} }

// Close frees the model. Every session must be closed first.
func (e *Engine) Close() error {
	if e.sessions > 0 {
		return fmt.Errorf("llamacpp: Close with %d open sessions", e.sessions)
	}
	if e.model == nil {
		return nil
	}
	err := e.model.Close()
	e.model = nil
	if e.tiers != nil {
		err = errors.Join(err, e.tiers.close())
	}
	return err
}
