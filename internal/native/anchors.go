package native

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Shared anchors (issue #29.4): the anchor cells of every layer's K and V
// (the first Session.Anchors slots: BOS, a system prompt) are identical in
// every session of a model that starts with the same prompt. The kernel's
// samepage merging (KSM) can keep one copy, but it merges only private
// anonymous pages, and the KV arena is a MAP_SHARED memfd. So the whole
// pages of each region's anchor cells are moved to private anonymous memory
// at the same addresses (memfd.Buffer.Privatize: the ggml tensors and
// every slice into the arena stay valid), and advised MADV_MERGEABLE while
// more than one session of the engine is open (MADV_UNMERGEABLE when one
// is left), or always with Options.ShareAnchors: KSM compares contents,
// so identical anchors in other processes (one `serve` each) merge too.
// See RATIONALE.md, "Shared anchors".

// anchorZone returns the bytes at the start of each region that hold
// anchor cells only: floor(anchors·RowK / page) pages. A partly filled
// page also holds ring slots, which differ between sessions: it stays in
// the memfd.
func (a *KVArena) anchorZone(anchors int) int64 {
	ps := int64(os.Getpagesize())
	z := int64(anchors) * a.RowK / ps * ps
	return min(z, (a.vOff[0]-a.kOff[0])/ps*ps)
}

// SetAnchorCells makes the whole pages of the first anchors cells of every
// layer's K and V private anonymous memory (and the pages of a previous,
// larger zone the memfd's again), keeping their contents. Call it again
// after RowK changes (a KV type change).
func (a *KVArena) SetAnchorCells(anchors int) error {
	if a == nil || a.mem == nil {
		return ErrClosed
	}
	want := a.anchorZone(anchors)
	if want == a.zone {
		return nil
	}
	for il := range a.K {
		for _, base := range []int64{a.kOff[il], a.vOff[il]} {
			var err error
			if want > a.zone {
				err = a.mem.Privatize(int(base+a.zone), int(want-a.zone))
				if err == nil && a.merge {
					err = a.mem.Advise(int(base+a.zone), int(want-a.zone), unix.MADV_MERGEABLE)
				}
			} else {
				err = a.mem.Share(int(base+want), int(a.zone-want))
			}
			if err != nil {
				return fmt.Errorf("KV anchor zone: layer %d: %w", il, err)
			}
		}
	}
	a.zone = want
	return nil
}

// AnchorZoneBytes is the private anonymous zone at the start of each K and
// V region (a multiple of the page size; 0 without anchors).
func (a *KVArena) AnchorZoneBytes() int64 { return a.zone }

// Mergeable reports whether the anchor zones are advised MADV_MERGEABLE.
func (a *KVArena) Mergeable() bool { return a.merge }

// SetMergeable advises the anchor zones MADV_MERGEABLE (on) or
// MADV_UNMERGEABLE (off: merged pages are copied back, private to this
// arena). Zones made later follow the setting.
func (a *KVArena) SetMergeable(on bool) error {
	if a == nil || a.mem == nil {
		return ErrClosed
	}
	if on == a.merge {
		return nil
	}
	advice := unix.MADV_UNMERGEABLE
	if on {
		advice = unix.MADV_MERGEABLE
	}
	if a.zone > 0 {
		for il := range a.K {
			for _, base := range []int64{a.kOff[il], a.vOff[il]} {
				if err := a.mem.Advise(int(base), int(a.zone), advice); err != nil {
					return fmt.Errorf("KV anchor zone: layer %d: %w", il, err)
				}
			}
		}
	}
	a.merge = on
	return nil
}

// openSessions is an engine's registry of open sessions: their anchor
// zones are mergeable while there are at least two, or always.
type openSessions struct {
	mu     sync.Mutex
	list   []*Session
	always bool // Options.ShareAnchors: other processes may hold the same anchors
}

// add registers s and advises every session's zones when s is the second.
func (o *openSessions) add(s *Session) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.list = append(o.list, s)
	return o.adviseLocked()
}

// remove unregisters s; the one left, if only one is, gets its zones
// unmerged (unless always).
func (o *openSessions) remove(s *Session) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, x := range o.list {
		if x == s {
			o.list = append(o.list[:i], o.list[i+1:]...)
			break
		}
	}
	return o.adviseLocked()
}

func (o *openSessions) mergeable() bool { return o.always || len(o.list) > 1 }

func (o *openSessions) adviseLocked() error {
	var first error
	for _, s := range o.list {
		if s.kv == nil {
			continue
		}
		if err := s.kv.SetMergeable(o.mergeable()); err != nil && first == nil {
			first = fmt.Errorf("native: %w", err)
		}
	}
	return first
}

// applyAnchorZone gives the session's arena the private zone of its
// anchors and the engine's merge advice (after the anchors, the arena or
// its row size change).
func (s *Session) applyAnchorZone() error {
	if err := s.kv.SetAnchorCells(s.anchors); err != nil {
		return fmt.Errorf("native: %w", err)
	}
	o := &s.eng.open
	o.mu.Lock()
	on := o.mergeable()
	o.mu.Unlock()
	if err := s.kv.SetMergeable(on); err != nil {
		return fmt.Errorf("native: %w", err)
	}
	return nil
}
