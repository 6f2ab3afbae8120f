package llamacpp

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// maxStateBytes bounds the payload length a state may claim before it is
// read (a corrupt length must not allocate without limit).
const maxStateBytes = 1 << 34

// stateHeader is what a state saved by s says, and what a state restored
// into s must match.
func (s *Session) stateHeader() engine.StateHeader {
	return engine.StateHeader{Engine: "llamacpp", Model: engine.ModelIdentity(s.e.info, s.e.Vocab()),
		KVType: s.cfg.KVType, NCtx: s.ctx.NCtxSeq(), Len: s.n}
}

// DecodeCount is the number of llama_decode calls the session has made
// (a long prompt's chunks each count): a restore adds none.
func (s *Session) DecodeCount() int64 { return s.decodes }

// SaveState writes the header, then llama.cpp's own state of sequence 0
// (llama_state_seq_get_data: its KV cells), length first.
func (s *Session) SaveState(w io.Writer) error {
	if s.ctx == nil {
		return kernels.ErrClosed
	}
	size, err := s.ctx.StateSeqSize(0)
	if err != nil {
		return err
	}
	buf := make([]byte, size)
	n, err := s.ctx.StateSeqGet(buf, 0)
	if err != nil {
		return err
	}
	if err := engine.WriteStateHeader(w, s.stateHeader()); err != nil {
		return err
	}
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(n))
	if _, err := w.Write(l[:]); err != nil {
		return err
	}
	_, err = w.Write(buf[:n])
	return err
}

// RestoreState reads a state SaveState wrote into sequence 0
// (llama_state_seq_set_data): no decode.
func (s *Session) RestoreState(r io.Reader) error {
	if s.ctx == nil {
		return kernels.ErrClosed
	}
	if err := s.Truncate(0); err != nil {
		return err
	}
	h, err := engine.ReadStateHeader(r, s.stateHeader())
	if err != nil {
		return err
	}
	var l [8]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return fmt.Errorf("%w: truncated", engine.ErrBadState)
	}
	n := binary.LittleEndian.Uint64(l[:])
	if n == 0 || n > maxStateBytes {
		return fmt.Errorf("%w: a payload of %d bytes", engine.ErrBadState, n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("%w: truncated payload (%d bytes claimed)", engine.ErrBadState, n)
	}
	if err := s.ctx.StateSeqSet(buf, 0); err != nil {
		return fmt.Errorf("%w: %v", engine.ErrBadState, err)
	}
	// The cells restored must be the positions the header claims.
	if hi, err := s.ctx.MemorySeqPosMax(0); err != nil || hi+1 != h.Len {
		s.ctx.MemorySeqRm(0, 0, -1)
		return fmt.Errorf("%w: the header says %d positions, the payload holds up to %d", engine.ErrBadState, h.Len, hi+1)
	}
	s.n, s.lastLen = h.Len, 0
	return nil
}
