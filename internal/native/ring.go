package native

import (
	"fmt"
	"slices"

	"github.com/edgellm/edgellm/kernels"
)

// KV rings: which slot of the arena holds which position, per group of
// layers. Without a window a session has one ring with slot = position.
// With windows (SetWindow, SetLayerWindows) positions below the session's
// anchors keep slots [0, anchors) and the others go round a ring per
// distinct window; layers with the same window share a ring (its slot
// table, head and attended length), so the graph needs one set_rows index
// and one mask per ring, not per layer. See RATIONALE.md.

// maxRings bounds the distinct windows (rings) of a session; more distinct
// per-layer windows are merged, rounding windows up (mergeWindows).
const maxRings = 8

// kvRing is the slot bookkeeping of the layers that share one window.
type kvRing struct {
	window  int     // 0 = no window: slot = position (then it is the only ring)
	head    int     // next ring slot
	end     int     // ring slots are [anchors, end); nCtx without a window
	hi      int     // 1 + the highest slot that may hold a position
	slotPos []int32 // position held by each slot (-1: empty), len nCtx
	slots   []int64 // slot of each token of the batch being decoded, len nBatch
	layers  []int   // the layers using this ring, ascending
	merged  int     // merge eviction: positions below it are folded (evict.go)

	nextHead, nextHi int // head and hi after the batch being decoded
}

func newRing(nCtx, nBatch int) *kvRing {
	rg := &kvRing{end: nCtx, slotPos: make([]int32, nCtx), slots: make([]int64, nBatch)}
	for j := range rg.slotPos {
		rg.slotPos[j] = -1
	}
	return rg
}

// assign gives the nTok tokens from position n their slots (rg.slots) and
// returns the attended KV length: the highest slot rounded up to pad,
// capped at the ring's end (slots past it are released, never read).
// Nothing is committed: Decode sets head and hi once the graph is ready.
func (rg *kvRing) assign(n, nTok, anchors, pad int) int {
	hi, head := rg.hi, rg.head
	for i := range nTok {
		p := n + i
		slot := p
		if rg.window > 0 && p >= anchors {
			slot = head
			if head++; head == rg.end {
				head = anchors
			}
		}
		rg.slots[i] = int64(slot)
		hi = max(hi, slot+1)
	}
	rg.nextHead, rg.nextHi = head, hi
	return min(rg.end, (hi+pad-1)/pad*pad)
}

// fillMask writes the [nKV, nTok] mask of a batch starting at position n:
// token i at position p sees slot j when it holds a position q with q ≤ p
// and (q is an anchor, or q is one of the last `window`).
func (rg *kvRing) fillMask(mask []uint16, nKV, n, nTok, anchors int) {
	a, w := int32(anchors), int32(rg.window)
	for i := range nTok {
		row := mask[i*nKV : (i+1)*nKV]
		p := int32(n + i)
		for j := range row {
			q := rg.slotPos[j]
			if q >= 0 && q <= p && (w == 0 || q < a || q > p-w) {
				row[j] = kernels.F16Zero
			} else {
				row[j] = kernels.F16NegInf
			}
		}
	}
}

// truncate moves the head back over the dropped positions [n, oldN)
// (O(dropped)); positions they had evicted stay evicted. Without a window
// it is O(1): stale slots hold positions ≥ the next query's and are
// overwritten before they become visible.
func (rg *kvRing) truncate(n, oldN, anchors int) {
	if rg.window == 0 {
		return
	}
	rg.merged = min(rg.merged, n)
	ring := rg.end - anchors
	for p := oldN - 1; p >= max(n, anchors); p-- {
		rg.head--
		if rg.head < anchors {
			rg.head = anchors + ring - 1
		}
		rg.slotPos[rg.head] = -1
	}
	for p := n; p < min(oldN, anchors); p++ {
		rg.slotPos[p] = -1
	}
}

// ringInUse reports whether positions beyond the anchors have been written.
func (s *Session) ringInUse() bool {
	for _, rg := range s.rings {
		if rg.window > 0 && rg.hi > 0 && s.n > s.anchors {
			return true
		}
	}
	return false
}

// SetWindow keeps the first anchors positions (system prompt, attention
// sinks) and the most recent window positions, in every layer; older ones
// are evicted as new tokens arrive. window 0 turns the ring off (then Decode
// stops at the context size; anchors are left as they are). Both may change
// between steps: shrinking the window hides older positions at once and
// releases the slots past the new ring; anchors can only be set while
// Len() ≤ anchors or while no window is in force (positions are then at
// slot = position, the anchors' slots). Positions keep their original
// values (no K re-rotation), past the context too: see RATIONALE.md. It is
// SetLayerWindows with every layer's window equal.
func (s *Session) SetWindow(anchors, window int) error {
	if s.kv == nil {
		return ErrClosed
	}
	if anchors < 0 || window < 0 {
		return fmt.Errorf("native: window %d, anchors %d", window, anchors)
	}
	if window == 0 {
		return s.windowOff()
	}
	ws := make([]int, s.cfg.NLayer)
	for i := range ws {
		ws[i] = window
	}
	return s.setWindows(anchors, ws)
}

// SetLayerWindows gives each layer its own window: layer il keeps the
// first anchors positions and its most recent windows[il]. Every layer has
// a window (≥ 1); layers with equal windows share a ring, and a session has
// at most 8 distinct windows: beyond that the closest ones are merged,
// rounding windows up, never down. A layer's KV slots past
// anchors + window + n_batch are released (MADV_REMOVE), so shallow layers
// with small windows cost memory for their window only. Windows may change
// between steps; a layer whose window grows sees the positions it had
// evicted only as they are decoded again (evicted positions stay evicted).
func (s *Session) SetLayerWindows(anchors int, windows []int) error {
	if s.kv == nil {
		return ErrClosed
	}
	if len(windows) != s.cfg.NLayer {
		return fmt.Errorf("native: %d layer windows for %d layers", len(windows), s.cfg.NLayer)
	}
	if anchors < 0 {
		return fmt.Errorf("native: %d anchors", anchors)
	}
	for il, w := range windows {
		if w < 1 {
			return fmt.Errorf("native: layer %d: window %d (want ≥ 1; every layer has a window once one has)", il, w)
		}
	}
	return s.setWindows(anchors, windows)
}

// LayerWindows is each layer's window in force (after merging), all 0
// without a window.
func (s *Session) LayerWindows() []int {
	ws := make([]int, s.cfg.NLayer)
	for _, rg := range s.rings {
		for _, il := range rg.layers {
			ws[il] = rg.window
		}
	}
	return ws
}

// Anchors is the number of anchor positions in force.
func (s *Session) Anchors() int { return s.anchors }

// windowOff turns every ring off: one ring, slot = position. Only before
// the rings are in use (positions beyond the anchors written).
func (s *Session) windowOff() error {
	if s.trainedWindows() != nil { // back to the trained sliding rings
		if !s.userWindow {
			return nil
		}
		if s.n > s.anchors {
			return fmt.Errorf("native: cannot turn the window off once the ring is in use")
		}
		_, err := s.trainedLayout(s.n)
		return err
	}
	windowed := s.rings[0].window > 0
	if windowed && s.n > s.nCtx {
		return fmt.Errorf("native: cannot turn the window off at %d > context %d", s.n, s.nCtx)
	}
	if windowed && s.ringInUse() {
		return fmt.Errorf("native: cannot turn the window off once the ring is in use")
	}
	rg := s.rings[0]
	rg.window, rg.end = 0, s.nCtx
	if len(s.rings) == 1 {
		return nil
	}
	// The rings only hold anchors (slot = position in all of them): keep
	// ring 0's table for every layer.
	rg.layers = rg.layers[:0]
	for il := range s.cfg.NLayer {
		rg.layers = append(rg.layers, il)
	}
	s.rings = s.rings[:1]
	return s.relayoutDone()
}

// mergeWindows returns each layer's window after merging the distinct
// windows down to maxRings: while there are too many, the adjacent pair
// with the smallest ratio becomes the larger of the two (windows are only
// rounded up, so no layer loses context it asked for).
func mergeWindows(windows []int) []int {
	d := slices.Clone(windows)
	slices.Sort(d)
	d = slices.Compact(d)
	for len(d) > maxRings {
		best := 0
		for i := 1; i+1 < len(d); i++ {
			if float64(d[i+1])/float64(d[i]) < float64(d[best+1])/float64(d[best]) {
				best = i
			}
		}
		d = slices.Delete(d, best, best+1)
	}
	out := make([]int, len(windows))
	for il, w := range windows {
		i, _ := slices.BinarySearch(d, w) // the smallest kept window ≥ w
		out[il] = d[i]
	}
	return out
}

// setWindows applies validated per-layer windows (all ≥ 1).
func (s *Session) setWindows(anchors int, windows []int) error {
	// Without a window every position is at slot = position, so the first
	// anchors are where anchors live whatever the length: a window set
	// mid-generation (a policy's decision) may bring its anchors.
	if anchors != s.anchors && s.n > min(anchors, s.anchors) && s.windowed() && !s.slotIsPos() {
		return fmt.Errorf("native: anchors can change only before they are filled or while there is no window (Len %d)", s.n)
	}
	for il, w := range windows {
		if anchors+w+1 > s.nCtx {
			return fmt.Errorf("native: layer %d: %d anchors + window %d exceed the context of %d slots", il, anchors, w, s.nCtx)
		}
	}
	ws := mergeWindows(s.capTrained(windows))
	oldOf := make([]*kvRing, s.cfg.NLayer) // each layer's ring now
	for _, rg := range s.rings {
		for _, il := range rg.layers {
			oldOf[il] = rg
		}
	}
	// The new rings, in order of their first layer.
	var next []*kvRing
	byWindow := map[int]*kvRing{}
	for il, w := range ws {
		rg := byWindow[w]
		if rg == nil {
			rg = &kvRing{window: w, end: min(s.nCtx, anchors+w+s.nBatch)}
			if s.trainedWindows() != nil && w == s.cfg.NSWA { // the trained ring's slots (swaring.go)
				rg.end = min(s.nCtx, (anchors+w+s.nBatch+defaultKVPad-1)/defaultKVPad*defaultKVPad)
			}
			byWindow[w] = rg
			next = append(next, rg)
		}
		rg.layers = append(rg.layers, il)
	}
	changed := len(next) != len(s.rings) // the layer→ring map or a ring's slots
	for i, rg := range next {
		old := oldOf[rg.layers[0]]
		same := anchors == s.anchors && old.end == rg.end
		for _, il := range rg.layers {
			same = same && oldOf[il] == old
		}
		if same {
			// All its layers come from one ring with the same slots: the
			// window changes in the mask only, no row moves.
			if old.window == 0 {
				// Switching on: the ring continues after the positions held.
				old.head = max(s.n, anchors)
				if old.head >= old.end {
					old.head = anchors
				}
				for j := s.n; j < len(old.slotPos); j++ { // stale after a truncate
					old.slotPos[j] = -1
				}
			}
			if slices.Equal(old.layers, rg.layers) {
				old.window = rg.window
				next[i] = old
				continue
			}
			// Some of the old ring's layers: a copy of its slot table.
			rg.head, rg.hi = old.head, old.hi
			rg.slotPos = slices.Clone(old.slotPos)
			rg.slots = make([]int64, s.nBatch)
			changed = true
			continue
		}
		changed = true
		if err := s.relayout(rg, oldOf, anchors); err != nil {
			return err
		}
	}
	s.anchors = anchors
	s.rings = next
	s.userWindow = true
	if err := s.applyAnchorZone(); err != nil {
		return err
	}
	if !changed {
		return nil
	}
	return s.relayoutDone()
}

// relayoutDone records a new layer→ring map: the graph key changes and
// the activation buffer is reserved for the largest graph of the layout.
func (s *Session) relayoutDone() error {
	for r, rg := range s.rings {
		for _, il := range rg.layers {
			s.ringOf[il] = uint8(r)
		}
	}
	s.ringGen++
	return s.reserve()
}

// relayout fills the new ring rg from the rings its layers used so far:
// it keeps the positions within rg's window that every one of those rings
// still holds, moves them in position order to slots [anchors, ...) of each
// of rg's layers (one copy of at most window rows per layer, only when the
// windows change; eviction itself never copies), and releases the slots
// past rg's end where it shrank.
func (s *Session) relayout(rg *kvRing, oldOf []*kvRing, anchors int) error {
	lo := max(anchors, s.n-rg.window) // the window is [lo, n)
	cnt := max(0, s.n-lo)
	// For each old ring involved: the slot of each position in [lo, n).
	idx := map[*kvRing][]int32{}
	for _, il := range rg.layers {
		o := oldOf[il]
		if idx[o] != nil {
			continue
		}
		m := make([]int32, cnt)
		for i := range m {
			m[i] = -1
		}
		for j, q := range o.slotPos[:o.end] {
			if q >= int32(lo) && q < int32(s.n) {
				m[q-int32(lo)] = int32(j)
			}
		}
		idx[o] = m
	}
	var keep []int32 // positions held by every old ring, ascending
	for i := range cnt {
		held := true
		for _, m := range idx {
			held = held && m[i] >= 0
		}
		if held {
			keep = append(keep, int32(lo+i))
		}
	}
	keep = keep[len(keep)-min(len(keep), rg.end-anchors):]

	row := int(s.kv.RowK)
	tmp := make([]byte, len(keep)*row)
	for _, il := range rg.layers {
		m := idx[oldOf[il]]
		for _, v := range []bool{false, true} {
			reg := s.kv.region(il, v)
			moved := false
			for i, q := range keep {
				j := int(m[q-int32(lo)])
				moved = moved || j != anchors+i
				copy(tmp[i*row:(i+1)*row], reg[j*row:(j+1)*row])
			}
			if moved {
				copy(reg[anchors*row:], tmp)
			}
		}
		if old := oldOf[il].end; rg.end < old {
			if err := s.kv.Discard(il, rg.end, s.nCtx); err != nil {
				return fmt.Errorf("native: %w", err)
			}
		}
	}
	rg.slotPos = make([]int32, s.nCtx)
	rg.slots = make([]int64, s.nBatch)
	for j := range rg.slotPos {
		rg.slotPos[j] = -1
	}
	for j := range min(s.n, anchors) {
		rg.slotPos[j] = int32(j)
	}
	copy(rg.slotPos[anchors:], keep)
	rg.hi = min(s.n, anchors)
	if len(keep) > 0 {
		rg.hi = anchors + len(keep)
	}
	rg.head = anchors + len(keep)
	if rg.head == rg.end {
		rg.head = anchors
	}
	return nil
}
