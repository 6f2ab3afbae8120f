package llamacpp

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/memfd"
	"github.com/edgellm/edgellm/kernels"
)

// A tier ladder is a list of GGUF files of one base model ordered from high to
// low precision. Swapping tiers mid-generation migrates the KV cache:
//
//  1. serialise: llama_state_seq_get_data into a memfd buffer the host owns
//  2. unload:    free the context and the model
//  3. load:      load the other tier's model
//  4. restore:   a fresh context, llama_state_seq_set_data from the buffer
//
// The files must agree on everything the serialised state depends on
// (architecture, vocabulary, layer count, KV shape); LoadLadder checks that
// before anything is loaded, so a bad ladder is refused with nothing freed.
type ladder struct {
	paths []string
	cur   int
	state *memfd.Buffer
}

func (l *ladder) close() error {
	if l.state == nil {
		return nil
	}
	err := l.state.Close()
	l.state = nil
	return err
}

// SwapTimings are the phases of one tier swap.
type SwapTimings = engine.SwapTimings

// ladderShape is what must agree across a ladder.
type ladderShape struct {
	arch                          string
	nLayer, nEmbd, nHead, nHeadKV uint64
	keyLen, valLen                uint64
	nVocab                        int
	vocabHash                     [32]byte
	vocabModel                    string
}

func readShape(path string) (ladderShape, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return ladderShape{}, err
	}
	var s ladderShape
	s.arch = f.Arch()
	if s.arch == "" {
		return s, fmt.Errorf("%s: no general.architecture", path)
	}
	get := func(key string, dst *uint64, required bool) error {
		v, err := f.GetUint(s.arch + "." + key)
		if err != nil {
			if required {
				return fmt.Errorf("%s: %w", path, err)
			}
			return nil
		}
		*dst = v
		return nil
	}
	for _, k := range []struct {
		key string
		dst *uint64
		req bool
	}{
		{"block_count", &s.nLayer, true},
		{"embedding_length", &s.nEmbd, true},
		{"attention.head_count", &s.nHead, true},
		{"attention.head_count_kv", &s.nHeadKV, false},
		{"attention.key_length", &s.keyLen, false},
		{"attention.value_length", &s.valLen, false},
	} {
		if err := get(k.key, k.dst, k.req); err != nil {
			return s, err
		}
	}
	if s.nHeadKV == 0 {
		s.nHeadKV = s.nHead
	}
	toks, err := f.GetStringArray("tokenizer.ggml.tokens")
	if err != nil {
		return s, fmt.Errorf("%s: no vocabulary: %w", path, err)
	}
	h := sha256.New()
	for _, t := range toks {
		h.Write([]byte(t))
		h.Write([]byte{0})
	}
	copy(s.vocabHash[:], h.Sum(nil))
	s.nVocab = len(toks)
	s.vocabModel, _ = f.GetString("tokenizer.ggml.model")
	if len(f.Tensors) == 0 {
		return s, fmt.Errorf("%s: a vocabulary-only file, not a model", path)
	}
	return s, nil
}

// CheckLadder verifies that every file of a ladder can take the others' KV
// state: same architecture, vocabulary, layer count and KV shape.
func CheckLadder(paths []string) error {
	if len(paths) < 2 {
		return fmt.Errorf("a tier ladder needs at least 2 files, got %d", len(paths))
	}
	base, err := readShape(paths[0])
	if err != nil {
		return err
	}
	for _, p := range paths[1:] {
		s, err := readShape(p)
		if err != nil {
			return err
		}
		diff := func(what string, a, b any) error {
			return fmt.Errorf("tier ladder: %s has %s %v but %s has %v", p, what, b, paths[0], a)
		}
		switch {
		case s.arch != base.arch:
			return diff("architecture", base.arch, s.arch)
		case s.nVocab != base.nVocab:
			return diff("vocabulary size", base.nVocab, s.nVocab)
		case s.vocabHash != base.vocabHash || s.vocabModel != base.vocabModel:
			return fmt.Errorf("tier ladder: %s has a different vocabulary from %s", p, paths[0])
		case s.nLayer != base.nLayer:
			return diff("layer count", base.nLayer, s.nLayer)
		case s.nEmbd != base.nEmbd:
			return diff("embedding length", base.nEmbd, s.nEmbd)
		case s.nHead != base.nHead || s.nHeadKV != base.nHeadKV || s.keyLen != base.keyLen || s.valLen != base.valLen:
			return fmt.Errorf("tier ladder: %s has KV shape heads %d/%d (k %d, v %d) but %s has %d/%d (k %d, v %d)",
				p, s.nHead, s.nHeadKV, s.keyLen, s.valLen, paths[0], base.nHead, base.nHeadKV, base.keyLen, base.valLen)
		}
	}
	return nil
}

// LoadLadder checks the ladder, then loads tier start.
func LoadLadder(paths []string, start int, opts Options) (*Engine, error) {
	if err := CheckLadder(paths); err != nil {
		return nil, err
	}
	if start < 0 || start >= len(paths) {
		return nil, fmt.Errorf("tier %d: the ladder has tiers 0..%d", start, len(paths)-1)
	}
	e, err := Load(paths[start], opts)
	if err != nil {
		return nil, err
	}
	buf, err := memfd.New("edgellm-kv-state", 0)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.tiers = &ladder{paths: append([]string(nil), paths...), cur: start, state: buf}
	return e, nil
}

// Tiers returns the number of tiers (1 for a plain model) and the current one.
func (e *Engine) Tiers() (n, cur int) {
	if e.tiers == nil {
		return 1, 0
	}
	return len(e.tiers.paths), e.tiers.cur
}

// SwapTier moves the session to tier `to`, migrating its KV state. On a
// failure after the old model was freed, the old tier is reloaded and its
// state restored, so the session survives (the error still says what failed).
func (s *Session) SwapTier(to int) (SwapTimings, error) {
	e := s.e
	l := e.tiers
	t := SwapTimings{From: 0, To: to}
	if l == nil {
		return t, errors.New("tier swap: the engine was not loaded as a tier ladder")
	}
	t.From = l.cur
	if to < 0 || to >= len(l.paths) {
		return t, fmt.Errorf("tier swap: tier %d does not exist (0..%d)", to, len(l.paths)-1)
	}
	if to == l.cur {
		return t, nil
	}
	if s.ctx == nil {
		return t, kernels.ErrClosed
	}

	// 1. serialise the sequence into the memfd buffer.
	t0 := time.Now()
	size, err := s.ctx.StateSeqSize(0)
	if err != nil {
		return t, fmt.Errorf("tier swap: state size: %w", err)
	}
	if size > l.state.Len() {
		if err := l.state.Resize(size); err != nil {
			return t, err
		}
	}
	n, err := s.ctx.StateSeqGet(l.state.Bytes()[:size], 0)
	if err != nil {
		return t, fmt.Errorf("tier swap: serialise: %w", err)
	}
	t.StateBytes = n
	t.Serialize = time.Since(t0)

	// 2. unload: context, then model.
	t0 = time.Now()
	s.batch.Close()
	err = s.ctx.Close()
	s.ctx = nil
	err = errors.Join(err, e.model.Close())
	e.model = nil
	t.Unload = time.Since(t0)
	if err != nil {
		return t, fmt.Errorf("tier swap: unload: %w", err)
	}

	// 3. load the new tier; 4. restore into a fresh context.
	loadErr := s.reopen(l.paths[to], l.state.Bytes()[:n], &t)
	if loadErr == nil {
		l.cur = to
		return t, nil
	}
	// Recover: back to the tier we came from, with the same state.
	if err := s.reopen(l.paths[t.From], l.state.Bytes()[:n], nil); err != nil {
		return t, fmt.Errorf("tier swap to %d failed (%v) and restoring tier %d failed too: %w", to, loadErr, t.From, err)
	}
	return t, fmt.Errorf("tier swap to %d failed, stayed on tier %d: %w", to, t.From, loadErr)
}

// reopen loads path, creates the session's context and restores state.
func (s *Session) reopen(path string, state []byte, t *SwapTimings) error {
	e := s.e
	t0 := time.Now()
	m, err := kernels.LoadModel(path, kernels.ModelParams{NoMmap: e.opts.NoMmap, Repack: e.opts.Repack})
	if err != nil {
		return err
	}
	if t != nil {
		t.Load = time.Since(t0)
	}
	t0 = time.Now()
	ctx, err := kernels.NewContext(m, contextParams(s.cfg))
	if err != nil {
		m.Close()
		return err
	}
	b, err := kernels.NewBatch(ctx.NBatch(), 1)
	if err != nil {
		ctx.Close()
		m.Close()
		return err
	}
	if err := ctx.StateSeqSet(state, 0); err != nil {
		b.Close()
		ctx.Close()
		m.Close()
		return fmt.Errorf("restore state: %w", err)
	}
	if t != nil {
		t.Restore = time.Since(t0)
	}
	e.setModel(m)
	s.ctx, s.batch = ctx, b
	s.lastLen = 0
	return nil
}

var _ engine.Session = (*Session)(nil)
