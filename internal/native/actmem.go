package native

import (
	"fmt"

	"github.com/edgellm/edgellm/kernels"
)

// ActivationMemory is the activation memory of one forward pass of the
// session's graph: ggml's graph allocator against keeping every
// intermediate tensor (the design's "tensor lifetimes" claim; issue #29).
type ActivationMemory struct {
	NTok, NKV int
	// Graph is the graph's own account: keep everything, and the peak of
	// live bytes when each tensor is freed after its last consumer.
	Graph kernels.GraphMemory
	// Allocated is ggml's graph allocator's buffer for this graph alone.
	Allocated int64
}

// ActivationMemory builds the session's graph for a batch of nTok tokens
// attending nKV positions (prefill of a 512-token prompt: 512, 512; one
// decode step at position p: 1, p+1), with logits for the last token, and
// measures it with a fresh allocator: the session's own buffer is neither
// used nor grown, and its next decode rebuilds its graph.
func (s *Session) ActivationMemory(nTok, nKV int) (ActivationMemory, error) {
	if s.kv == nil {
		return ActivationMemory{}, ErrClosed
	}
	if nTok < 1 || nTok > s.nBatch || nKV < nTok || nKV > s.nCtx {
		return ActivationMemory{}, fmt.Errorf("native: activation memory of %d tokens over %d positions (want 1 ≤ tokens ≤ batch %d, tokens ≤ positions ≤ context %d)",
			nTok, nKV, s.nBatch, s.nCtx)
	}
	key := graphKey{nTok: nTok, nOut: 1, selGen: s.selGen, repackGen: s.eng.repackGen, ringGen: s.ringGen}
	for r, rg := range s.rings {
		key.setNKV(r, min(nKV, rg.end))
	}
	s.gr.ringOf = s.ringOf
	defer func() { s.gr.key = graphKey{} }() // measured, not allocated: the next decode rebuilds
	if err := s.gr.build(key, s.cfg, s.eng.sets[s.headSet], s.layers, s.kv, s.flash); err != nil {
		return ActivationMemory{}, fmt.Errorf("native: build graph: %w", err)
	}
	m := ActivationMemory{NTok: nTok, NKV: nKV, Graph: s.gr.g.Memory()}
	ga, err := kernels.NewGallocr()
	if err != nil {
		return m, err
	}
	defer ga.Close()
	if err := ga.Reserve(s.gr.g); err != nil {
		return m, err
	}
	m.Allocated = ga.BufferSize()
	return m, nil
}
