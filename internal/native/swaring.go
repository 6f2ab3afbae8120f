package native

import "fmt"

// Trained sliding windows (Gemma 2/3): the sliding layers (Config.IsSWA)
// attend only to the last NSWA positions, so their KV needs a ring of
// NSWA + n_batch slots (padded as llama.cpp pads its SWA cache), not
// the context. A session of such a model starts
// with two rings: the sliding layers' (window NSWA) and the global
// layers' (window 0: slot = position, the context bounds Decode). A
// policy or user window narrows either ring but never widens a sliding
// layer past NSWA (capTrained); turning the window off returns to this
// layout. Slots past a ring's end are never written, so the memfd pages
// behind them are never resident. See RATIONALE.md.

// trainedWindows is each layer's trained window: NSWA for the sliding
// layers, 0 for the others; nil when the model has no sliding layer or
// the ring would not be smaller than the context.
func (s *Session) trainedWindows() []int {
	if s.cfg.NSWA <= 0 || s.trainedEnd(s.cfg.NSWA) >= s.nCtx {
		return nil
	}
	ws := make([]int, s.cfg.NLayer)
	any := false
	for il := range ws {
		if s.cfg.IsSWA(il) {
			ws[il], any = s.cfg.NSWA, true
		}
	}
	if !any {
		return nil
	}
	return ws
}

// trainedLayout sets the rings of the trained windows with the first n
// positions (all ≤ anchors, at slot = position) already held. No rows
// move. It reports false when the model has no trained window.
func (s *Session) trainedLayout(n int) (bool, error) {
	ws := s.trainedWindows()
	if ws == nil {
		return false, nil
	}
	var swa, glob *kvRing
	s.rings = s.rings[:0]
	for il, w := range ws {
		rg := &swa
		if w == 0 {
			rg = &glob
		}
		if *rg == nil {
			end := s.nCtx
			if w > 0 {
				end = s.trainedEnd(w)
			}
			if n > end {
				return true, fmt.Errorf("native: %d positions do not fit the sliding layers' ring of %d slots", n, end)
			}
			*rg = newRing(s.nCtx, s.nBatch)
			(*rg).window, (*rg).end = w, end
			for j := range n {
				(*rg).slotPos[j] = int32(j)
			}
			(*rg).head, (*rg).hi = n, n
			if (*rg).head == end {
				(*rg).head = s.anchors
			}
			s.rings = append(s.rings, *rg)
		}
		(*rg).layers = append((*rg).layers, il)
	}
	s.userWindow = false
	return true, s.relayoutDone()
}

// trainedEnd is the end of a trained sliding ring of window w: window +
// n_batch slots rounded up to the KV padding, llama.cpp's SWA cache size
// (llama_kv_cache_iswa: GGML_PAD(n_swa + n_ubatch, 256)), so the slots of
// the positions and the attended length are llama.cpp's and the logits
// stay bit-identical to it (TestParityFamilies).
func (s *Session) trainedEnd(w int) int {
	return min(s.nCtx, (s.anchors+w+s.nBatch+defaultKVPad-1)/defaultKVPad*defaultKVPad)
}

// capTrained narrows a requested per-layer window to the trained one on
// the sliding layers: a policy window never widens a layer past its
// trained window.
func (s *Session) capTrained(windows []int) []int {
	ws := s.trainedWindows()
	if ws == nil {
		return windows
	}
	out := make([]int, len(windows))
	for il, w := range windows {
		out[il] = w
		if ws[il] > 0 {
			out[il] = min(w, ws[il])
		}
	}
	return out
}

// windowed reports whether some ring has a window (positions go round).
func (s *Session) windowed() bool {
	for _, rg := range s.rings {
		if rg.window > 0 {
			return true
		}
	}
	return false
}

// ctxBound reports whether some ring has no window: its slots are
// positions, so the context bounds Decode.
func (s *Session) ctxBound() bool {
	for _, rg := range s.rings {
		if rg.window == 0 {
			return true
		}
	}
	return false
}

// trainedTruncateOK reports whether, after dropping [n, Len()), every
// trained sliding ring still holds the last NSWA positions before n (it
// holds the last end-anchors positions written; those it overwrote are
// gone). Under a user window evicted positions stay evicted by design.
func (s *Session) trainedTruncateOK(n int) error {
	if s.userWindow {
		return nil
	}
	for _, rg := range s.rings {
		if rg.window > 0 && s.n > rg.end && s.n-n > rg.end-s.anchors-rg.window {
			return fmt.Errorf("native: truncate from %d to %d: the sliding layers' ring (window %d, %d slots) no longer holds the positions before %d", s.n, n, rg.window, rg.end, n)
		}
	}
	return nil
}

// KVLiveBytes is the KV memory the rings can ever write: for each layer,
// its ring's slots (K and V). Slots past a ring's end are never touched.
func (s *Session) KVLiveBytes() int64 {
	var b int64
	for _, rg := range s.rings {
		b += int64(rg.end) * int64(len(rg.layers)) * 2 * s.kv.RowK
	}
	return b
}

// slotIsPos reports whether every position is still at slot = position in
// every ring: only trained rings, none of them wrapped yet.
func (s *Session) slotIsPos() bool {
	if s.userWindow {
		return false
	}
	for _, rg := range s.rings {
		if rg.window > 0 && s.n > rg.end {
			return false
		}
	}
	return true
}
