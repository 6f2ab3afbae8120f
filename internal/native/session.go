package native

import (
	"fmt"
	"time"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// defaultKVPad is the default granularity of the attended KV length (graphs
// are rebuilt only when the sequence crosses a multiple of it). 256 is
// llama.cpp's: the same padding gives bit-identical attention sums, see
// RATIONALE.md.
const defaultKVPad = 256

// Session is one sequence on the native engine: its KV arena, its compute
// resources (threadpool, CPU backend, graph allocator) and its reusable graph.
// Not safe for concurrent use. Close it before its Engine.
type Session struct {
	eng    *Engine
	sc     engine.SessionConfig // as created, resolved (Config)
	cfg    *Config
	nCtx   int
	nBatch int
	flash  bool
	// ownAttn (SessionConfig.Attention edgellm): flash attention runs
	// edgellm's kernel where it applies.
	ownAttn bool

	kv *KVArena
	tp *kernels.Threadpool
	be *kernels.CPUBackend
	ga *kernels.Gallocr
	gr *graph

	// kvDraftShared: a draft model's KV lives in kv's memfd (draftmodel.go)
	// and the type cannot change; cleared when the draft is detached.
	kvDraftShared bool

	// lastGr is the graph of the last Decode (the target's or a draft
	// pass's): Logits reads it.
	lastGr *graph

	layers   []*LayerWeights // weights used per layer (the selected set)
	layerSet []int           // weight set of each layer
	headSet  int             // weight set of the embedding and output head
	selGen   uint64          // bumped by every selection change (graph key)
	counted  bool            // counted in the engine's set use

	// KV slots (ring.go). Without a window, one ring with slot = position.
	// With windows (SetWindow, SetLayerWindows), positions below anchors
	// keep slots [0, anchors) forever and the others go round a ring per
	// distinct window: eviction is a head move.
	rings   []*kvRing
	ringOf  []uint8 // ring of each layer
	ringGen uint64  // bumped by every change of the layer→ring map (graph key)
	anchors int
	// userWindow: the rings come from SetWindow/SetLayerWindows, not only
	// from the trained sliding windows (swaring.go).
	userWindow bool

	evict    EvictMode // what windows do with evicted positions (evict.go)
	mergeBuf []float32 // scratch for merging F16 rows

	n         int               // positions in the KV cache
	lastN     int               // tokens in the last Decode batch
	lastMode  engine.LogitsMode // logits kept by the last Decode
	lastValid bool              // the last Decode produced logits
	stats     Stats             // counters for benchmarks and tests
	lat       *layerLatency     // per-layer latency sampling (latency.go), nil = off
}

// Stats counts what the session did (graph rebuilds against reuses).
type Stats struct {
	Decodes     int
	GraphBuilds int
	GraphReuses int
	// GraphBuildTime is the time spent building and allocating graphs
	// (shape changes and weight-set switches).
	GraphBuildTime time.Duration
	ActBufBytes    int64 // graph allocator buffer
	KVBytes        int64 // KV arena mapping
	KVBytesToken   int64 // KV bytes per token, all layers
	MergedRows     int   // K/V rows written by merge eviction (evict.go)
}

var _ engine.Session = (*Session)(nil)

// NewSession creates a sequence with its own KV arena. The session
// implements the live setters of the abilities the engine was loaded with,
// and only those (public.go); SessionOf unwraps it.
func (e *Engine) NewSession(sc engine.SessionConfig) (engine.Session, error) {
	s, err := e.newSession(sc)
	if err != nil {
		return nil, err
	}
	return s.public(), nil
}

func (e *Engine) newSession(sc engine.SessionConfig) (*Session, error) {
	return e.newSessionOn(sc, nil)
}

// newSessionOn creates a session over kv (nil: a new arena); a given arena
// (a draft model's part of its target's memfd) is closed with the session.
func (e *Engine) newSessionOn(sc engine.SessionConfig, kv *KVArena) (*Session, error) {
	if e.closed {
		return nil, ErrClosed
	}
	cfg := &e.w.Config
	sc, err := sc.Fit(cfg.NCtxTrain)
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	if sc.Attention > engine.AttentionEdgellm {
		return nil, fmt.Errorf("native: attention %d", sc.Attention)
	}
	s := &Session{eng: e, cfg: cfg, nCtx: sc.NCtx, nBatch: sc.NBatch, flash: sc.Attention != engine.AttentionClassic,
		ownAttn: sc.Attention == engine.AttentionEdgellm}
	typ, err := kvGGMLType(sc.KVType)
	if err != nil {
		return nil, err
	}
	threads := sc.Threads
	if threads <= 0 {
		threads = e.defaultThreads()
	}
	sc.Threads = threads
	s.sc = sc
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if kv != nil {
		s.kv = kv
	} else if s.kv, err = NewKVArena(cfg, typ, s.nCtx); err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	if s.tp, err = e.newThreadpool(threads); err != nil {
		return nil, err
	}
	if s.be, err = kernels.NewCPUBackend(s.tp, 0); err != nil {
		return nil, err
	}
	if s.ga, err = kernels.NewGallocr(); err != nil {
		return nil, err
	}
	if s.gr, err = s.newGraph(); err != nil {
		return nil, err
	}
	rg := newRing(s.nCtx, s.nBatch)
	for il := range cfg.NLayer {
		rg.layers = append(rg.layers, il)
	}
	s.rings = []*kvRing{rg}
	s.ringOf = make([]uint8, cfg.NLayer)
	s.gr.ringOf = s.ringOf
	s.initSets()
	if trained, err := s.trainedLayout(0); err != nil {
		return nil, err
	} else if !trained {
		if err := s.reserve(); err != nil {
			return nil, err
		}
	}
	s.stats.KVBytes = s.kv.Bytes()
	s.stats.KVBytesToken = s.kv.BytesPerToken()
	if err := e.open.add(s); err != nil {
		e.open.remove(s)
		return nil, err
	}
	ok = true
	return s, nil
}

// Decode evaluates tokens at positions [Len(), Len()+len(tokens)) as one
// graph and keeps logits for the last token or all of them. Under a window
// a LogitsLast batch larger than the rings allow beside their windows (a
// long prompt after a context shift) is decoded in consecutive batches
// that fit; if one fails, the batches before it stay decoded (Len says how
// far it got).
func (s *Session) Decode(tokens []int32, want engine.LogitsMode) error {
	if want == engine.LogitsLast && s.kv != nil && s.windowed() {
		step := s.nBatch
		for _, rg := range s.rings {
			step = min(step, rg.end-s.anchors-rg.window)
		}
		if step > 0 && len(tokens) > step {
			n := len(tokens)
			for len(tokens) > step {
				if err := s.decode(nil, tokens[:step], want); err != nil {
					return err
				}
				tokens = tokens[step:]
			}
			if err := s.decode(nil, tokens, want); err != nil {
				return err
			}
			s.lastN = n // Logits(n-1): the last token of the whole batch
			return nil
		}
	}
	return s.decode(nil, tokens, want)
}

// decode is Decode through pass p (nil: the target's full graph; a draft
// pass runs fewer layers or another weight set over the same KV, spec.go).
func (s *Session) decode(p *pass, tokens []int32, want engine.LogitsMode) error {
	if s.kv == nil {
		return ErrClosed
	}
	nTok := len(tokens)
	if s.ctxBound() && s.n+nTok > s.nCtx {
		return fmt.Errorf("native: %w: %d + %d tokens > %d", engine.ErrContextFull, s.n, nTok, s.nCtx)
	}
	if nTok == 0 || nTok > s.nBatch {
		return fmt.Errorf("native: batch of %d tokens (want 1-%d)", nTok, s.nBatch)
	}
	for _, rg := range s.rings {
		if rg.window > 0 && rg.window+nTok > rg.end-s.anchors {
			return fmt.Errorf("native: batch of %d with window %d does not fit the ring of %d slots", nTok, rg.window, rg.end-s.anchors)
		}
	}
	if s.n+nTok > 1<<30 {
		return fmt.Errorf("native: %w: position %d", engine.ErrContextFull, s.n+nTok)
	}
	nv := int32(s.cfg.NVocab)
	for _, t := range tokens {
		if t < 0 || t >= nv {
			return fmt.Errorf("native: %w: %d (n_vocab %d)", ErrBadToken, t, nv)
		}
	}
	nOut := 1
	if want == engine.LogitsAll {
		nOut = nTok
	}
	end := s.n + nTok
	// Assign slots first: the attended lengths depend on the highest ones.
	pad := s.eng.opts.KVPad
	key := graphKey{nTok: nTok, nOut: nOut, selGen: s.selGen, repackGen: s.eng.repackGen, ringGen: s.ringGen}
	gr, ga, layers, head := s.gr, s.ga, s.layers, s.eng.sets[s.headSet]
	if p != nil {
		gr, ga, layers, head = p.gr, p.ga, p.layers(s), p.head(s)
	}
	// Every ring takes the batch's slots (Truncate moves every head back
	// over dropped positions), but a graph of fewer layers (skip:N) writes
	// and reads only the rings of its layers: the others have no inputs in
	// it and no attended length in its key.
	gr.ringOf = s.ringOf
	used := gr.ringUsed(len(layers))
	for r, rg := range s.rings {
		nKV := rg.assign(s.n, nTok, s.anchors, pad)
		if used[r] {
			key.setNKV(r, nKV)
		}
	}
	s.lastValid = false
	s.lastGr = gr
	if gr.key != key {
		t0 := time.Now()
		if err := gr.build(key, s.cfg, head, layers, s.kv, s.flash); err != nil {
			return fmt.Errorf("native: build graph: %w", err)
		}
		if err := ga.Alloc(gr.g); err != nil {
			gr.key = graphKey{}
			return err
		}
		s.stats.GraphBuilds++
		s.stats.GraphBuildTime += time.Since(t0)
	} else {
		s.stats.GraphReuses++
	}
	g := gr
	copy(g.tokens.Int32s(), tokens)
	pos := g.pos.Int32s()
	for i := range nTok {
		pos[i] = int32(s.n + i)
	}
	s.mergeEvicted(s.n, used[:])
	for r, rg := range s.rings {
		rg.hi = rg.nextHi
		if !used[r] {
			// The batch's slots in this ring are not written: they hold
			// nothing (their old positions were outside every later
			// query's window, spec.go) until a full graph writes them.
			for _, j := range rg.slots[:nTok] {
				rg.slotPos[j] = -1
			}
			continue
		}
		copy(g.slots[r].Int64s(), rg.slots[:nTok])
		for i, j := range rg.slots[:nTok] {
			rg.slotPos[j] = int32(s.n + i)
		}
		rg.fillMask(g.mask[r].Uint16s(), key.nKVOf(r), s.n, nTok, s.anchors)
		if !g.maskSWA[r].Nil() { // trained sliding layers (family.go)
			fillSWAMask(g.maskSWA[r].Uint16s(), g.mask[r].Uint16s(), rg, key.nKVOf(r), s.n, nTok, s.cfg.NSWA)
		}
	}
	if !g.outIDs.Nil() { // nOut is 1 here: the last token
		g.outIDs.Int32s()[0] = int32(nTok - 1)
		if !g.outPos.Nil() {
			g.outPos.Int32s()[0] = int32(s.n + nTok - 1)
		}
	}
	if err := s.compute(g); err != nil {
		for _, rg := range s.rings { // the batch's slots hold nothing valid now
			for _, j := range rg.slots[:nTok] {
				rg.slotPos[j] = -1
			}
		}
		return err
	}
	s.n = end
	for _, rg := range s.rings {
		rg.head = rg.nextHead
	}
	s.lastN, s.lastMode, s.lastValid = nTok, want, true
	s.stats.Decodes++
	return nil
}

// Logits copies the logits of the i-th token of the last batch into dst.
func (s *Session) Logits(i int, dst []float32) error {
	if s.kv == nil {
		return ErrClosed
	}
	if !s.lastValid || i < 0 || i >= s.lastN {
		return fmt.Errorf("native: %w: %d", ErrNoLogits, i)
	}
	row := i
	if s.lastMode != engine.LogitsAll {
		if i != s.lastN-1 {
			return fmt.Errorf("native: %w: %d (only the last token, %d, has logits)", ErrNoLogits, i, s.lastN-1)
		}
		row = 0
	}
	nv := s.cfg.NVocab
	if len(dst) < nv {
		return fmt.Errorf("native: logits buffer of %d < n_vocab %d", len(dst), nv)
	}
	copy(dst[:nv], s.lastGr.logits.Float32s()[row*nv:(row+1)*nv])
	return nil
}

// Len is the number of positions in the KV cache.
func (s *Session) Len() int { return s.n }

// Truncate drops positions [n, Len()). Without a window it is O(1): the
// slots are masked out (they hold positions ≥ the next query's) and
// overwritten by later tokens. With windows each ring's head moves back over
// the dropped tokens (O(dropped)); positions they had evicted stay evicted.
func (s *Session) Truncate(n int) error {
	if n < 0 || n > s.n {
		return fmt.Errorf("native: truncate to %d outside [0, %d]", n, s.n)
	}
	if err := s.trainedTruncateOK(n); err != nil {
		return err
	}
	for _, rg := range s.rings {
		rg.truncate(n, s.n, s.anchors)
	}
	s.n = n
	return nil
}

// reserve sizes the activation buffer for the largest graph of the current
// ring layout (a full batch attending every ring up to its end, all logits)
// so later graphs never grow it. Called at creation and when the layout
// changes; the buffer never shrinks.
func (s *Session) reserve() error {
	key := graphKey{nTok: s.nBatch, nOut: s.nBatch, selGen: s.selGen, repackGen: s.eng.repackGen, ringGen: s.ringGen}
	for r, rg := range s.rings {
		key.setNKV(r, rg.end)
	}
	s.gr.ringOf = s.ringOf
	if err := s.gr.build(key, s.cfg, s.eng.sets[s.headSet], s.layers, s.kv, s.flash); err != nil {
		return fmt.Errorf("native: build graph: %w", err)
	}
	err := s.ga.Reserve(s.gr.g)
	s.gr.key = graphKey{} // reserved, not allocated
	s.stats.ActBufBytes = s.ga.BufferSize()
	return err
}

// Stats returns the session's counters.
func (s *Session) Stats() Stats { return s.stats }

// KV returns the session's KV arena.
func (s *Session) KV() *KVArena { return s.kv }

// Close releases the KV arena and compute resources. Safe to call twice.
func (s *Session) Close() error {
	if s.eng != nil && s.kv != nil {
		s.eng.open.remove(s) // an error here only leaves advice behind
	}
	s.releaseSets()
	s.lat.close()
	if s.gr != nil {
		s.gr.Close()
		s.gr = nil
	}
	s.ga.Close()
	s.be.Close()
	s.tp.Close()
	err := s.kv.Close()
	s.kv = nil
	return err
}

// KVBytesPerToken is the KV arena's bytes per token over all layers.
func (s *Session) KVBytesPerToken() int64 { return s.stats.KVBytesToken }
