package native

import (
	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// shapeGraphs keeps one full-model graph per small batch size that a
// speculative session decodes again and again: a session has one graph and
// rebuilds it whenever the batch size changes, and a rebuild allocates (Go
// wrappers of the graph's tensors). Speculation alternates sizes every
// round (plain steps of one token, verify batches of nd+1 tokens with nd
// varying for n-gram drafts, a draft model's catch-up batches), so without
// these graphs every round rebuilt one or two graphs: ~8 heap allocations
// per token with n-gram drafts. The graphs of sizes 2..K+1 are created
// when K is set (Speculator.SetK, all sizes with auto K), so no round
// allocates; each has its own compute buffer (small: at most MaxSpecK+1
// tokens). One token and batches larger than MaxSpecK+1 (prompts) use the
// session's own graph.
type shapeGraphs struct {
	p [MaxSpecK + 2]*pass // p[n]: the graph of n tokens, n ≥ 2
}

// decode is s.Decode(tokens, want) on the graph of len(tokens) tokens.
func (g *shapeGraphs) decode(s *Session, tokens []int32, want engine.LogitsMode) error {
	n := len(tokens)
	if n < 2 || n >= len(g.p) {
		return s.Decode(tokens, want)
	}
	if g.p[n] == nil {
		if err := g.create(s, n); err != nil {
			return err
		}
	}
	return s.decode(g.p[n], tokens, want)
}

// create makes the graph of n tokens.
func (g *shapeGraphs) create(s *Session, n int) error {
	p := &pass{skip: s.cfg.NLayer}
	var err error
	if p.gr, err = s.newGraph(); err != nil {
		return err
	}
	if p.ga, err = kernels.NewGallocr(); err != nil {
		p.gr.Close()
		return err
	}
	g.p[n] = p
	return nil
}

// prepare creates and builds the graphs of 2..maxN tokens not made yet,
// reserving each one's compute buffer for its largest attended length
// (every ring to its end, all logits), as Session.reserve does: the
// first build of a graph allocates its Go wrappers; later rebuilds
// (longer contexts, new layouts) reuse them.
func (g *shapeGraphs) prepare(s *Session, maxN int) error {
	for n := 2; n <= maxN && n < len(g.p); n++ {
		if g.p[n] != nil {
			continue
		}
		if err := g.create(s, n); err != nil {
			return err
		}
		p := g.p[n]
		key := graphKey{nTok: n, nOut: n, selGen: s.selGen, repackGen: s.eng.repackGen, ringGen: s.ringGen}
		for r, rg := range s.rings {
			key.setNKV(r, rg.end)
		}
		p.gr.ringOf = s.ringOf
		if err := p.gr.build(key, s.cfg, p.head(s), p.layers(s), s.kv, s.flash); err != nil {
			return err
		}
		err := p.ga.Reserve(p.gr.g)
		p.gr.key = graphKey{} // reserved, not allocated
		if err != nil {
			return err
		}
	}
	return nil
}

func (g *shapeGraphs) close() error {
	var err error
	for i, p := range g.p {
		if p != nil {
			p.ga.Close()
			if e := p.gr.Close(); e != nil && err == nil {
				err = e
			}
			g.p[i] = nil
		}
	}
	return err
}

// bytes is the compute memory of the graphs created so far.
func (g *shapeGraphs) bytes() int64 {
	var n int64
	for _, p := range g.p {
		if p != nil {
			n += p.ga.BufferSize()
		}
	}
	return n
}

// ComputeBytes is the compute (activation) memory the speculation adds
// beside the session's own: its verify graphs (one per batch size used),
// a skip or self draft's graph, a draft model's graphs. Not part of the
// KV arena (DraftKVBytes).
func (sp *Speculator) ComputeBytes() int64 {
	n := sp.graphs.bytes()
	d := sp.d
	if m, ok := d.(*synthMiss); ok {
		d = m.drafter
	}
	switch d := d.(type) {
	case *passDrafter:
		n += d.p.ga.BufferSize()
	case *modelDrafter:
		n += d.graphs.bytes() + d.s.ga.BufferSize()
	}
	return n
}
