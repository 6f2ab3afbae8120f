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
	// Rings is the attended KV length of each ring the graph reads (one
	// ring without a window, one per distinct window with them).
	Rings []int
	// Buffer is the session's own graph allocator buffer when measured:
	// reserved for the largest graph of the ring layout, never shrunk.
	Buffer int64
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
	return s.measure(s.gr, nTok, nKV)
}

// LastGraphMemory measures the graph of the session's last Decode (same
// batch, attended lengths and ring layout: call it before the window
// changes) as ActivationMemory does, on a scratch graph: the session's
// graph and buffer are untouched and its next decode reuses its graph.
// NKV is the longest ring's attended length.
func (s *Session) LastGraphMemory() (ActivationMemory, error) {
	if s.kv == nil {
		return ActivationMemory{}, ErrClosed
	}
	key := s.gr.key
	if key.nTok == 0 || key.ringGen != s.ringGen {
		return ActivationMemory{}, fmt.Errorf("native: no decode graph of the current ring layout to measure")
	}
	g, err := s.newGraph()
	if err != nil {
		return ActivationMemory{}, err
	}
	defer g.Close()
	g.ringOf = s.ringOf
	if err := g.build(key, s.cfg, s.eng.sets[s.headSet], s.layers, s.kv, s.flash); err != nil {
		return ActivationMemory{}, fmt.Errorf("native: build graph: %w", err)
	}
	nKV := 0
	for r, used := range g.ringUsed(len(s.layers)) {
		if used {
			nKV = max(nKV, key.nKVOf(r))
		}
	}
	return s.measure(g, key.nTok, nKV)
}

// measure counts g's tensors (built, not allocated) and plans it with a
// fresh allocator.
func (s *Session) measure(g *graph, nTok, nKV int) (ActivationMemory, error) {
	m := ActivationMemory{NTok: nTok, NKV: nKV, Graph: g.g.Memory(), Buffer: s.ga.BufferSize()}
	for r, used := range g.ringUsed(len(s.layers)) {
		if used {
			m.Rings = append(m.Rings, g.key.nKVOf(r))
		}
	}
	ga, err := kernels.NewGallocr()
	if err != nil {
		return m, err
	}
	defer ga.Close()
	if err := ga.Reserve(g.g); err != nil {
		return m, err
	}
	m.Allocated = ga.BufferSize()
	return m, nil
}
