package native

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// A native state is what a session is: the anchors, every KV ring's window,
// head, end, high mark, merge mark, its layers and its occupied slots
// (slot, position), then the K and V rows of those slots of each layer of
// the ring, read from the memfd arena (only the slots in use, not the
// arena). A restoring session must have the same ring layout (the same
// windows per layer and anchors): the state names what differs otherwise.

// stateHeader is what a state saved by s says, and what a state restored
// into s must match.
func (s *Session) stateHeader() engine.StateHeader {
	return engine.StateHeader{Engine: "native", Model: engine.ModelIdentity(s.eng.Info(), s.eng.Vocab()),
		KVType: kernels.GGMLKVType(s.kv.Type), NCtx: s.nCtx, Len: s.n}
}

func (s *Session) stateOK() error {
	switch {
	case s.kv == nil:
		return ErrClosed
	case s.kvDraftShared:
		return fmt.Errorf("native: session state: a draft model shares the KV arena; detach it first")
	}
	return nil
}

// SaveState writes the header and the session's rings and used KV rows.
func (s *Session) SaveState(w io.Writer) error {
	if err := s.stateOK(); err != nil {
		return err
	}
	if err := engine.WriteStateHeader(w, s.stateHeader()); err != nil {
		return err
	}
	var b []byte
	u32 := func(v int) { b = binary.LittleEndian.AppendUint32(b, uint32(int32(v))) }
	u32(s.anchors)
	u32(len(s.rings))
	for _, rg := range s.rings {
		u32(rg.window)
		u32(rg.head)
		u32(rg.end)
		u32(rg.hi)
		u32(rg.merged)
		u32(len(rg.layers))
		for _, il := range rg.layers {
			u32(il)
		}
		used := rg.used(s.n)
		u32(len(used))
		for _, j := range used {
			u32(j)
			u32(int(rg.slotPos[j]))
		}
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	row := int(s.kv.RowK)
	for _, rg := range s.rings {
		used := rg.used(s.n)
		for _, il := range rg.layers {
			for _, v := range []bool{false, true} {
				reg := s.kv.region(il, v)
				for _, j := range used {
					if _, err := w.Write(reg[j*row : (j+1)*row]); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// DecodeCount is the number of forward passes (Decode batches, a draft's
// included) the session has run: a restore adds none.
func (s *Session) DecodeCount() int64 { return int64(s.stats.Decodes) }

// used lists the ring's slots holding a position below n, ascending
// (without a window, slots past n may hold stale positions ≥ n).
func (rg *kvRing) used(n int) []int {
	var u []int
	for j, p := range rg.slotPos {
		if p >= 0 && int(p) < n {
			u = append(u, j)
		}
	}
	return u
}

// stateReader reads little-endian int32s and remembers the first error.
type stateReader struct {
	r   io.Reader
	err error
}

func (sr *stateReader) int() int {
	var b [4]byte
	if sr.err == nil {
		if _, err := io.ReadFull(sr.r, b[:]); err != nil {
			sr.err = fmt.Errorf("%w: truncated", engine.ErrBadState)
		}
	}
	return int(int32(binary.LittleEndian.Uint32(b[:])))
}

// RestoreState replaces the session's context with a saved state: the
// rings' bookkeeping and the used K/V rows are written back; nothing is
// decoded. On error the session is empty.
func (s *Session) RestoreState(r io.Reader) (err error) {
	if err := s.stateOK(); err != nil {
		return err
	}
	if err := s.Truncate(0); err != nil {
		return err
	}
	h, err := engine.ReadStateHeader(r, s.stateHeader())
	if err != nil {
		return err
	}
	s.resetRings()
	defer func() {
		if err != nil {
			s.resetRings()
		}
	}()
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: %s", engine.ErrBadState, fmt.Sprintf(f, a...))
	}
	sr := &stateReader{r: r}
	if a := sr.int(); sr.err == nil && a != s.anchors {
		return bad("%d anchors, this session has %d", a, s.anchors)
	}
	if n := sr.int(); sr.err == nil && n != len(s.rings) {
		return bad("%d KV rings (windows), this session has %d", n, len(s.rings))
	}
	if sr.err != nil {
		return sr.err
	}
	used := make([][]int, len(s.rings))
	for i, rg := range s.rings {
		window, head, end, hi, merged := sr.int(), sr.int(), sr.int(), sr.int(), sr.int()
		if sr.err != nil {
			return sr.err
		}
		if window != rg.window || end != rg.end {
			return bad("ring %d has window %d (end %d), this session's has window %d (end %d)", i, window, end, rg.window, rg.end)
		}
		nl := sr.int()
		if sr.err == nil && nl != len(rg.layers) {
			return bad("ring %d holds %d layers, this session's %d", i, nl, len(rg.layers))
		}
		for _, il := range rg.layers {
			if l := sr.int(); sr.err == nil && l != il {
				return bad("ring %d holds layer %d, this session's layer %d", i, l, il)
			}
		}
		nu := sr.int()
		if sr.err != nil {
			return sr.err
		}
		if nu < 0 || nu > len(rg.slotPos) || head < 0 || head > len(rg.slotPos) || hi < 0 || hi > len(rg.slotPos) || merged < 0 || merged > h.Len {
			return bad("ring %d: %d used slots, head %d, high mark %d, merged %d for %d slots", i, nu, head, hi, merged, len(rg.slotPos))
		}
		for k := 0; k < nu; k++ {
			j, p := sr.int(), sr.int()
			if sr.err != nil {
				return sr.err
			}
			if j < 0 || j >= len(rg.slotPos) || p < 0 || p >= h.Len || rg.slotPos[j] >= 0 {
				return bad("ring %d: slot %d at position %d", i, j, p)
			}
			rg.slotPos[j] = int32(p)
			used[i] = append(used[i], j)
		}
		rg.head, rg.hi, rg.merged = head, hi, merged
		rg.nextHead, rg.nextHi = head, hi
	}
	row := int(s.kv.RowK)
	for i, rg := range s.rings {
		for _, il := range rg.layers {
			for _, v := range []bool{false, true} {
				reg := s.kv.region(il, v)
				for _, j := range used[i] {
					if _, err := io.ReadFull(r, reg[j*row:(j+1)*row]); err != nil {
						return bad("truncated KV rows")
					}
				}
			}
		}
	}
	var extra [1]byte
	if n, _ := r.Read(extra[:]); n > 0 {
		return bad("bytes after the KV rows")
	}
	s.n, s.lastValid = h.Len, false
	return nil
}

// resetRings empties every ring (a failed restore).
func (s *Session) resetRings() {
	for _, rg := range s.rings {
		for j := range rg.slotPos {
			rg.slotPos[j] = -1
		}
		rg.head, rg.hi, rg.merged = 0, 0, 0
		rg.nextHead, rg.nextHi = 0, 0
	}
	s.n, s.lastValid = 0, false
}
