package native

import (
	"fmt"
	"runtime"
	"time"

	"github.com/edgellm/edgellm/internal/engine"
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
	cfg    *Config
	nCtx   int
	nBatch int
	flash  bool

	kv *KVArena
	tp *kernels.Threadpool
	be *kernels.CPUBackend
	ga *kernels.Gallocr
	gr *graph

	layers   []*LayerWeights // weights used per layer (the selected set)
	layerSet []int           // weight set of each layer
	headSet  int             // weight set of the embedding and output head
	selGen   uint64          // bumped by every selection change (graph key)
	counted  bool            // counted in the engine's set use

	// KV slots. slotPos[j] is the position held by slot j (-1: empty).
	// Without a window, slot = position. With one (SetWindow), positions
	// below anchors keep slots [0, anchors) forever and the others go round
	// a ring over the remaining slots: eviction is a head move.
	slotPos []int32
	anchors int
	window  int // 0 = no window: the whole context is kept
	head    int // next ring slot
	ringEnd int // ring slots are [anchors, ringEnd); ≤ nCtx
	hiSlot  int // 1 + the highest slot ever written

	n         int               // positions in the KV cache
	slotBuf   []int64           // slot of each batch token (scratch)
	lastN     int               // tokens in the last Decode batch
	lastMode  engine.LogitsMode // logits kept by the last Decode
	lastValid bool              // the last Decode produced logits
	stats     Stats             // counters for benchmarks and tests
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
}

var _ engine.Session = (*Session)(nil)

// NewSession creates a sequence with its own KV arena.
func (e *Engine) NewSession(sc engine.SessionConfig) (engine.Session, error) {
	return e.newSession(sc)
}

func (e *Engine) newSession(sc engine.SessionConfig) (*Session, error) {
	if e.closed {
		return nil, ErrClosed
	}
	cfg := &e.w.Config
	s := &Session{eng: e, cfg: cfg, nCtx: sc.NCtx, nBatch: sc.NBatch, flash: sc.FlashAttn}
	if s.nCtx <= 0 {
		s.nCtx = min(2048, cfg.NCtxTrain)
	}
	if s.nCtx > cfg.NCtxTrain {
		return nil, fmt.Errorf("native: context %d exceeds the model's training context %d", s.nCtx, cfg.NCtxTrain)
	}
	if s.nBatch <= 0 {
		s.nBatch = 512
	}
	s.nBatch = min(s.nBatch, s.nCtx)
	typ, err := kvGGMLType(sc.KVType)
	if err != nil {
		return nil, err
	}
	threads := sc.Threads
	if threads <= 0 {
		threads = e.opts.Threads
	}
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if s.kv, err = NewKVArena(cfg, typ, s.nCtx); err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	if s.tp, err = kernels.NewThreadpool(kernels.ThreadpoolParams{NThreads: threads, CPUs: e.opts.CPUs,
		Strict: e.opts.StrictCPU, Poll: e.opts.Poll}); err != nil {
		return nil, err
	}
	if s.be, err = kernels.NewCPUBackend(s.tp, 0); err != nil {
		return nil, err
	}
	if s.ga, err = kernels.NewGallocr(); err != nil {
		return nil, err
	}
	if s.gr, err = newGraph(cfg.NLayer); err != nil {
		return nil, err
	}
	s.ringEnd = s.nCtx
	s.slotBuf = make([]int64, s.nBatch)
	s.slotPos = make([]int32, s.nCtx)
	for i := range s.slotPos {
		s.slotPos[i] = -1
	}
	s.initSets()
	// Reserve the activation buffer once for the largest graph (a full batch
	// attending the whole context, all logits) so later graphs never grow it.
	if err := s.gr.build(graphKey{nTok: s.nBatch, nKV: s.nCtx, nOut: s.nBatch}, cfg, e.w, s.layers, s.kv, s.flash); err != nil {
		return nil, fmt.Errorf("native: build graph: %w", err)
	}
	if err := s.ga.Reserve(s.gr.g); err != nil {
		return nil, err
	}
	s.gr.key = graphKey{} // reserved, not allocated
	s.stats.ActBufBytes = s.ga.BufferSize()
	s.stats.KVBytes = s.kv.Bytes()
	s.stats.KVBytesToken = s.kv.BytesPerToken()
	ok = true
	return s, nil
}

// Decode evaluates tokens at positions [Len(), Len()+len(tokens)) as one
// graph and keeps logits for the last token or all of them.
func (s *Session) Decode(tokens []int32, want engine.LogitsMode) error {
	if s.kv == nil {
		return ErrClosed
	}
	nTok := len(tokens)
	if nTok == 0 || nTok > s.nBatch {
		return fmt.Errorf("native: batch of %d tokens (want 1-%d)", nTok, s.nBatch)
	}
	if s.window == 0 && s.n+nTok > s.nCtx {
		return fmt.Errorf("native: %w: %d + %d tokens > %d", ErrContextFull, s.n, nTok, s.nCtx)
	}
	if s.window > 0 && s.window+nTok > s.ringEnd-s.anchors {
		return fmt.Errorf("native: batch of %d with window %d does not fit the ring of %d slots", nTok, s.window, s.ringEnd-s.anchors)
	}
	if s.n+nTok > 1<<30 {
		return fmt.Errorf("native: %w: position %d", ErrContextFull, s.n+nTok)
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
	// Assign slots first: the attended length depends on the highest one.
	g := s.gr
	hi, head := s.hiSlot, s.head
	for i := range nTok {
		p := s.n + i
		slot := p
		if s.window > 0 && p >= s.anchors {
			slot = head
			if head++; head == s.ringEnd {
				head = s.anchors
			}
		}
		s.slotBuf[i] = int64(slot)
		hi = max(hi, slot+1)
	}
	pad := s.eng.opts.KVPad
	key := graphKey{nTok: nTok, nKV: min(s.nCtx, (hi+pad-1)/pad*pad), nOut: nOut, selGen: s.selGen}
	s.lastValid = false
	if s.gr.key != key {
		t0 := time.Now()
		if err := s.gr.build(key, s.cfg, s.eng.sets[s.headSet], s.layers, s.kv, s.flash); err != nil {
			return fmt.Errorf("native: build graph: %w", err)
		}
		if err := s.ga.Alloc(s.gr.g); err != nil {
			s.gr.key = graphKey{}
			return err
		}
		s.stats.GraphBuilds++
		s.stats.GraphBuildTime += time.Since(t0)
	} else {
		s.stats.GraphReuses++
	}
	g = s.gr
	copy(g.tokens.Int32s(), tokens)
	pos, slots := g.pos.Int32s(), g.slots.Int64s()
	copy(slots, s.slotBuf[:nTok])
	for i := range nTok {
		pos[i] = int32(s.n + i)
		s.slotPos[slots[i]] = int32(s.n + i)
	}
	s.hiSlot = hi
	// Mask: token i at position p sees slot j when it holds a position q
	// with q ≤ p and (q is an anchor, or q is one of the last `window`).
	mask, nKV := g.mask.Uint16s(), key.nKV
	anchors, window := int32(s.anchors), int32(s.window)
	for i := range nTok {
		row := mask[i*nKV : (i+1)*nKV]
		p := int32(s.n + i)
		for j := range row {
			q := s.slotPos[j]
			if q >= 0 && q <= p && (window == 0 || q < anchors || q > p-window) {
				row[j] = kernels.F16Zero
			} else {
				row[j] = kernels.F16NegInf
			}
		}
	}
	if !g.outIDs.Nil() {
		g.outIDs.Int32s()[0] = int32(nTok - 1)
	}
	if err := s.be.Compute(g.g); err != nil {
		for _, j := range slots[:nTok] { // the batch's slots hold nothing valid now
			s.slotPos[j] = -1
		}
		return err
	}
	s.n, s.head = end, head
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
	copy(dst[:nv], s.gr.logits.Float32s()[row*nv:(row+1)*nv])
	return nil
}

// Len is the number of positions in the KV cache.
func (s *Session) Len() int { return s.n }

// Truncate drops positions [n, Len()). Without a window it is O(1): the
// slots are masked out (they hold positions ≥ the next query's) and
// overwritten by later tokens. With a window the ring head moves back over
// the dropped tokens (O(dropped)); positions they had evicted stay evicted.
func (s *Session) Truncate(n int) error {
	if n < 0 || n > s.n {
		return fmt.Errorf("native: truncate to %d outside [0, %d]", n, s.n)
	}
	s.truncateSlots(n)
	s.n = n
	return nil
}

func (s *Session) truncateSlots(n int) {
	if s.window == 0 {
		return
	}
	ring := s.ringEnd - s.anchors
	for p := s.n - 1; p >= max(n, s.anchors); p-- {
		s.head--
		if s.head < s.anchors {
			s.head = s.anchors + ring - 1
		}
		s.slotPos[s.head] = -1
	}
	for p := n; p < min(s.n, s.anchors); p++ {
		s.slotPos[p] = -1
	}
}

// SetWindow keeps the first anchors positions (system prompt, attention
// sinks) and the most recent window positions; older ones are evicted as new
// tokens arrive. window 0 turns the ring off (then Decode stops at the
// context size). Both may change between steps: shrinking the window hides
// older positions at once (their slots are reused as the ring goes round);
// anchors can only be set while Len() ≤ anchors. Positions keep their
// original values (no K re-rotation): see RATIONALE.md.
func (s *Session) SetWindow(anchors, window int) error {
	if anchors < 0 || window < 0 {
		return fmt.Errorf("native: window %d, anchors %d", window, anchors)
	}
	if window == 0 {
		if s.window != 0 && s.n > s.nCtx {
			return fmt.Errorf("native: cannot turn the window off at %d > context %d", s.n, s.nCtx)
		}
		if s.window != 0 && s.hiSlot > 0 && s.n > s.anchors {
			return fmt.Errorf("native: cannot turn the window off once the ring is in use")
		}
		s.window = 0
		return nil
	}
	if anchors != s.anchors && s.n > min(anchors, s.anchors) {
		return fmt.Errorf("native: anchors can change only before they are filled (Len %d)", s.n)
	}
	if anchors+window+1 > s.nCtx {
		return fmt.Errorf("native: %d anchors + window %d exceed the context of %d slots", anchors, window, s.nCtx)
	}
	if s.window == 0 {
		// Switching on: the ring continues after the positions held so far.
		s.head = max(s.n, anchors)
		if s.head >= s.nCtx {
			s.head = anchors
		}
	}
	s.anchors, s.window = anchors, window
	// Size the ring to the window plus one batch; compact and release the
	// rest (MADV_DONTNEED) when it shrinks.
	if end := min(s.nCtx, anchors+window+s.nBatch); end != s.ringEnd {
		return s.resizeRing(end)
	}
	return nil
}

// resizeRing moves the most recent window positions to the start of the
// ring in position order (one copy of at most window rows per layer, only
// when the window changes; eviction itself never copies), makes the ring
// [anchors, end), and releases the KV pages of slots [end, nCtx).
func (s *Session) resizeRing(end int) error {
	A := s.anchors
	// Ring slots in age order, oldest first, starting at the head.
	var order []int
	for k := 0; k < s.ringEnd-A; k++ {
		j := A + (s.head-A+k)%(s.ringEnd-A)
		if q := s.slotPos[j]; q >= int32(A) && q > int32(s.n-1-s.window) {
			order = append(order, j)
		}
	}
	keep := min(len(order), end-A-s.nBatch)
	order = order[len(order)-keep:]
	pos := make([]int32, keep)
	for i, j := range order {
		pos[i] = s.slotPos[j]
	}
	row := int(s.kv.RowK)
	tmp := make([]byte, keep*row)
	for il := range s.kv.K {
		for _, reg := range [][]byte{s.kv.region(il, false), s.kv.region(il, true)} {
			for i, j := range order {
				copy(tmp[i*row:(i+1)*row], reg[j*row:(j+1)*row])
			}
			copy(reg[A*row:], tmp)
		}
	}
	for j := A; j < s.nCtx; j++ {
		s.slotPos[j] = -1
	}
	copy(s.slotPos[A:], pos)
	s.head = A + keep
	if s.head == end {
		s.head = A
	}
	old := s.ringEnd
	s.ringEnd = end
	s.hiSlot = min(s.hiSlot, end)
	if end < old {
		for il := range s.kv.K {
			if err := s.kv.Discard(il, end, s.nCtx); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stats returns the session's counters.
func (s *Session) Stats() Stats { return s.stats }

// KV returns the session's KV arena.
func (s *Session) KV() *KVArena { return s.kv }

// Close releases the KV arena and compute resources. Safe to call twice.
func (s *Session) Close() error {
	s.releaseSets()
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
