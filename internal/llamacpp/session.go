package llamacpp

import (
	"fmt"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// Session is one sequence (llama.cpp sequence 0) in its own context.
type Session struct {
	e     *Engine
	cfg   engine.SessionConfig
	ctx   *kernels.Context
	batch *kernels.Batch
	n     int // positions in the KV cache

	// The last Decode: its length, and the offset within it of the final
	// chunk that went through llama_decode (long prompts are split).
	lastLen, lastChunkOff int

	decodes int64 // llama_decode calls (DecodeCount)
}

var _ engine.Session = (*Session)(nil)

// contextParams maps a session config to llama.cpp's. Quantized V needs flash
// attention in llama.cpp; FlashAttnAuto lets it decide.
func contextParams(cfg engine.SessionConfig) kernels.ContextParams {
	fa := kernels.FlashAttnAuto
	switch cfg.Attention {
	case engine.AttentionFlash, engine.AttentionEdgellm: // edgellm's kernel is the native engine's
		fa = kernels.FlashAttnOn
	case engine.AttentionClassic:
		fa = kernels.FlashAttnOff
	}
	return kernels.ContextParams{
		NCtx:      cfg.NCtx,
		NBatch:    cfg.NBatch,
		Threads:   cfg.Threads,
		TypeK:     cfg.KVType,
		TypeV:     cfg.KVType,
		FlashAttn: fa,
	}
}

// NewSession creates a context with its own KV cache.
func (e *Engine) NewSession(cfg engine.SessionConfig) (engine.Session, error) {
	if e.model == nil {
		return nil, kernels.ErrClosed
	}
	if e.tiers != nil && e.sessions > 0 {
		return nil, fmt.Errorf("llamacpp: a tier ladder supports one session at a time")
	}
	cfg, err := cfg.Fit(e.info.NCtxTrain)
	if err != nil {
		return nil, fmt.Errorf("llamacpp: %w", err)
	}
	if _, err := engine.ParseKVType(string(cfg.KVType)); err != nil {
		return nil, err
	}
	ctx, err := kernels.NewContext(e.model, contextParams(cfg))
	if err != nil {
		return nil, err
	}
	b, err := kernels.NewBatch(ctx.NBatch(), 1)
	if err != nil {
		ctx.Close()
		return nil, err
	}
	e.sessions++
	return (&Session{e: e, cfg: cfg, ctx: ctx, batch: b}).public(), nil
}

// StateBytes is the size of llama.cpp's serialized state of the session's
// sequence (its KV cells as llama.cpp saves them): what the session's KV
// holds measured by llama.cpp itself, next to KVBytesPerToken's computed row
// sizes.
func (s *Session) StateBytes() (int, error) { return s.ctx.StateSeqSize(0) }

// Config returns the session's configuration (with defaults filled in).
func (s *Session) Config() engine.SessionConfig { return s.cfg }

// Engine is the engine the session was created from.
func (s *Session) Engine() engine.Engine { return s.e }

// Decode evaluates tokens at positions [Len(), Len()+len(tokens)). Batches
// larger than n_batch are split for LogitsLast; LogitsAll must fit one batch.
func (s *Session) Decode(tokens []int32, want engine.LogitsMode) error {
	if s.ctx == nil {
		return kernels.ErrClosed
	}
	n := len(tokens)
	if n == 0 {
		return kernels.ErrEmptyBatch
	}
	if s.n+n > s.ctx.NCtxSeq() {
		return fmt.Errorf("%w: %d tokens at position %d exceed the context of %d tokens", engine.ErrContextFull, n, s.n, s.ctx.NCtxSeq())
	}
	nb := s.ctx.NBatch()
	if want == engine.LogitsAll && n > nb {
		return fmt.Errorf("%w: %d tokens with logits for all, n_batch %d", kernels.ErrBatchTooLarge, n, nb)
	}
	s.lastLen = 0
	for off := 0; off < n; off += nb {
		end := min(off+nb, n)
		s.batch.Clear()
		for i := off; i < end; i++ {
			logits := want == engine.LogitsAll || i == n-1
			if err := s.batch.Add(tokens[i], s.n+i-off, 0, logits); err != nil {
				return err
			}
		}
		s.decodes++
		if err := s.ctx.Decode(s.batch); err != nil {
			// Drop whatever this chunk may have written, keeping [0, s.n).
			s.ctx.MemorySeqRm(0, s.n, -1)
			return err
		}
		s.n += end - off
		s.lastChunkOff = off
	}
	s.lastLen = n
	return nil
}

// Logits copies the logits of the i-th token of the last Decode into dst.
func (s *Session) Logits(i int, dst []float32) error {
	if i < s.lastChunkOff || i >= s.lastLen {
		return kernels.ErrNoLogits
	}
	return s.ctx.Logits(i-s.lastChunkOff, dst)
}

// Len is the number of positions in the KV cache.
func (s *Session) Len() int { return s.n }

// Truncate drops positions [n, Len()).
func (s *Session) Truncate(n int) error {
	if n < 0 || n > s.n {
		return fmt.Errorf("truncate to %d: session has %d positions", n, s.n)
	}
	if n == s.n {
		return nil
	}
	if err := s.ctx.MemorySeqRm(0, n, -1); err != nil {
		return err
	}
	s.n = n
	s.lastLen = 0
	return nil
}

// Close frees the context.
func (s *Session) Close() error {
	if s.ctx == nil {
		return nil
	}
	s.batch.Close()
	err := s.ctx.Close()
	s.ctx = nil
	s.e.sessions--
	return err
}

// SetThreads changes the decode thread count between steps (0 = all cores).
func (s *Session) SetThreads(n int) error {
	if s.ctx == nil {
		return kernels.ErrClosed
	}
	if err := s.ctx.SetThreads(n, n); err != nil {
		return err
	}
	s.cfg.Threads = n // kept across tier swaps
	return nil
}

// Threads is the decode thread count in force.
func (s *Session) Threads() int {
	if s.ctx == nil {
		return 0
	}
	n, _ := s.ctx.Threads()
	return n
}

// KVBytesPerToken is the size of one token's K and V over all layers in the
// session's KV type, as llama.cpp stores them (ggml row sizes).
func (s *Session) KVBytesPerToken() int64 {
	m := s.e.model
	if m == nil {
		return 0
	}
	info := s.e.info
	headDim := info.NEmbd / max(info.NHead, 1)
	row := int64(info.NHeadKV * headDim) // elements per token per layer, K or V
	bytes, err := kernels.RowBytes(s.cfg.KVType, row)
	if err != nil {
		return 0
	}
	return 2 * int64(info.NLayer) * bytes
}
