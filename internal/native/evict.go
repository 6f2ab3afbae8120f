package native

import (
	"fmt"
	"unsafe"

	"github.com/edgellm/edgellm/kernels"
)

// Decay-merge eviction (issue #29.2): instead of dropping the position that
// leaves a window, fold its K and V rows into the next position's slot
// (the oldest one still visible) with a decay weight:
//
//	row[q+1] = (1-MergeDecay)·row[q+1] + MergeDecay·row[q]
//
// The oldest visible slot thus carries an exponentially decaying summary of
// everything the window evicted. Cost per evicted position: per layer of
// the ring, two rows read and one written for K and for V (4 reads, 2
// writes of RowK bytes), whatever the sequence length; the ring head still
// moves in O(1) and no other slot is touched (Stats.MergedRows counts the
// rows written). See RATIONALE.md.

// EvictMode says what a window does with a position that leaves it.
type EvictMode uint8

const (
	// EvictDrop masks the position out (and the ring overwrites it later).
	EvictDrop EvictMode = iota
	// EvictMerge folds it into the next visible position's slot.
	EvictMerge
)

// MergeDecay is the weight of the evicted row in a merge.
const MergeDecay = 0.5

func (m EvictMode) String() string {
	switch m {
	case EvictDrop:
		return "drop"
	case EvictMerge:
		return "merge"
	}
	return fmt.Sprintf("evict(%d)", uint8(m))
}

// ParseEvictMode parses "drop" or "merge".
func ParseEvictMode(s string) (EvictMode, error) {
	switch s {
	case "drop", "":
		return EvictDrop, nil
	case "merge":
		return EvictMerge, nil
	}
	return 0, fmt.Errorf("native: eviction mode %q (want drop or merge)", s)
}

// SetEvict sets what windows do with evicted positions. Merging needs an
// F16 or F32 KV cache (a quantized row cannot be averaged in place without
// requantizing); with a quantized cache it is refused. It may change
// between steps; positions already dropped stay dropped.
func (s *Session) SetEvict(m EvictMode) error {
	if s.kv == nil {
		return ErrClosed
	}
	switch m {
	case EvictDrop:
	case EvictMerge:
		if !mergeable(s.kv.Type) {
			return fmt.Errorf("native: merge eviction needs an F16 or F32 KV cache")
		}
	default:
		return fmt.Errorf("native: eviction mode %d", m)
	}
	s.evict = m
	return nil
}

// Evict is the eviction mode in force.
func (s *Session) Evict() EvictMode { return s.evict }

func mergeable(t kernels.GGMLType) bool {
	return t == kernels.GGMLTypeF16 || t == kernels.GGMLTypeF32
}

// mergeEvicted folds, in every windowed ring the batch writes, the
// positions that leave the window of the batch's first token (at position
// n): q ≤ n - window, each into q+1. Called before the batch is computed
// and before its slots are recorded; the targets are never slots the batch
// writes (they hold positions ≥ n - window + 1 > n - window - n_batch).
// A position whose slot or successor is not where the ring's arithmetic
// puts it (after a relayout or a truncate) is dropped instead.
func (s *Session) mergeEvicted(n int, used []bool) {
	if s.evict != EvictMerge || !mergeable(s.kv.Type) {
		return
	}
	for r, rg := range s.rings {
		if rg.window < 2 || !used[r] || n == 0 {
			if rg.window > 0 {
				rg.merged = max(rg.merged, n-rg.window+1)
			}
			continue
		}
		last := n - rg.window // the last position to fold
		size := rg.end - s.anchors
		q := max(rg.merged, s.anchors, n-size)
		for ; q <= last; q++ {
			// Position n-1 is at slot head-1: walk back n-1-q ring slots.
			j := s.anchors + ((rg.head-1-s.anchors-(n-1-q))%size+size)%size
			k := j + 1
			if k == rg.end {
				k = s.anchors
			}
			if rg.slotPos[j] != int32(q) || rg.slotPos[k] != int32(q+1) {
				continue
			}
			for _, il := range rg.layers {
				s.mergeRow(il, false, j, k)
				s.mergeRow(il, true, j, k)
			}
			s.stats.MergedRows += 2 * len(rg.layers)
		}
		rg.merged = max(rg.merged, last+1)
	}
}

// mergeRow sets row dst of layer il's K (or V) region to
// (1-MergeDecay)·dst + MergeDecay·src.
func (s *Session) mergeRow(il int, v bool, src, dst int) {
	reg := s.kv.region(il, v)
	row := int(s.kv.RowK)
	a, b := reg[src*row:(src+1)*row], reg[dst*row:(dst+1)*row]
	const w = MergeDecay
	if s.kv.Type == kernels.GGMLTypeF32 {
		fa := unsafe.Slice((*float32)(unsafe.Pointer(&a[0])), row/4)
		fb := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), row/4)
		for i := range fb {
			fb[i] = (1-w)*fb[i] + w*fa[i]
		}
		return
	}
	ha := unsafe.Slice((*uint16)(unsafe.Pointer(&a[0])), row/2)
	hb := unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), row/2)
	if cap(s.mergeBuf) < row {
		s.mergeBuf = make([]float32, row) // 2 × row/2 floats
	}
	fa, fb := s.mergeBuf[:row/2], s.mergeBuf[row/2:row]
	kernels.FP16ToFP32Row(ha, fa)
	kernels.FP16ToFP32Row(hb, fb)
	for i := range fb {
		fb[i] = (1-w)*fb[i] + w*fa[i]
	}
	kernels.FP32ToFP16Row(fb, hb)
}

// SetEvictMode is SetEvict by name ("drop" or "merge"): the form the host
// API (host.EvictSetter) and the CLI use.
func (s *Session) SetEvictMode(mode string) error {
	m, err := ParseEvictMode(mode)
	if err != nil {
		return err
	}
	return s.SetEvict(m)
}

// EvictMode is the eviction mode in force by name (host.EvictSetter).
func (s *Session) EvictMode() string { return s.evict.String() }
