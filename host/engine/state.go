package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// StateSaver is implemented by sessions whose state (the KV cells of the
// positions they hold, and what says where those cells live) can be written
// out and read back into a session of the same model and KV type without
// decoding anything again. Both engines' sessions implement it, except a
// native session sharing its KV arena with a draft model.
type StateSaver interface {
	// SaveState writes the session's state to w: a StateHeader, then the
	// engine's payload.
	SaveState(w io.Writer) error
	// RestoreState replaces the session's context with a state SaveState
	// wrote. A state of another engine, model, KV type or a larger context
	// is refused with an error naming what differs; truncated or corrupt
	// input is an error, never a panic. On error the session is empty.
	RestoreState(r io.Reader) error
}

// StateMagic opens a saved session state; StateVersion is its layout.
const (
	StateMagic   = "EDGLKV"
	StateVersion = 1
)

// ErrBadState wraps every error about a saved state's bytes (truncated,
// corrupt, or of another model, engine or KV type).
var ErrBadState = errors.New("saved session state")

// StateHeader opens a saved state: what a restoring session must match.
type StateHeader struct {
	Engine string // "native" or "llamacpp"
	Model  string // ModelIdentity of the model that saved it
	KVType KVType
	NCtx   int // the saving session's context
	Len    int // positions held
}

// ModelIdentity is a digest of what makes two loaded models the same for a
// KV cache: the shape and the vocabulary (every token's text), not the
// file's path or name.
func ModelIdentity(info ModelInfo, v Vocab) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s|%d|%d|%d|%d|%d|%d|%d|%s|", info.Arch, info.NVocab, info.NEmbd,
		info.NLayer, info.NHead, info.NHeadKV, info.NFF, info.ParamCount, info.FileType)
	var buf []byte
	for t := range v.NVocab() {
		buf = v.Piece(buf[:0], int32(t))
		var l [4]byte
		binary.LittleEndian.PutUint32(l[:], uint32(len(buf)))
		h.Write(l[:])
		h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// WriteStateHeader writes h.
func WriteStateHeader(w io.Writer, h StateHeader) error {
	b := []byte(StateMagic)
	b = binary.LittleEndian.AppendUint16(b, StateVersion)
	for _, s := range []string{h.Engine, h.Model, string(h.KVType)} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(h.NCtx))
	b = binary.LittleEndian.AppendUint32(b, uint32(h.Len))
	_, err := w.Write(b)
	return err
}

// ReadStateHeader reads a header and checks it against want (Len is not
// compared; NCtx may be at most want's): the error names what differs.
func ReadStateHeader(r io.Reader, want StateHeader) (StateHeader, error) {
	var h StateHeader
	br := r // read byte-exactly: the payload follows in r
	var head [8]byte
	if _, err := io.ReadFull(br, head[:]); err != nil || string(head[:6]) != StateMagic {
		return h, fmt.Errorf("%w: not a saved state", ErrBadState)
	}
	if v := binary.LittleEndian.Uint16(head[6:]); v != StateVersion {
		return h, fmt.Errorf("%w: version %d, this library reads %d", ErrBadState, v, StateVersion)
	}
	var ss [3]string
	for i := range ss {
		var nb [1]byte
		_, err := io.ReadFull(br, nb[:])
		n := nb[0]
		if err != nil {
			return h, fmt.Errorf("%w: truncated header", ErrBadState)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return h, fmt.Errorf("%w: truncated header", ErrBadState)
		}
		ss[i] = string(b)
	}
	var nums [8]byte
	if _, err := io.ReadFull(br, nums[:]); err != nil {
		return h, fmt.Errorf("%w: truncated header", ErrBadState)
	}
	h = StateHeader{Engine: ss[0], Model: ss[1], KVType: KVType(ss[2]),
		NCtx: int(binary.LittleEndian.Uint32(nums[:])), Len: int(binary.LittleEndian.Uint32(nums[4:]))}
	switch {
	case h.Engine != want.Engine:
		return h, fmt.Errorf("%w: saved by the %s engine, this session is %s", ErrBadState, h.Engine, want.Engine)
	case h.Model != want.Model:
		return h, fmt.Errorf("%w: saved by another model (identity %s, this model %s)", ErrBadState, h.Model, want.Model)
	case h.KVType != want.KVType:
		return h, fmt.Errorf("%w: KV type %s, this session's is %s", ErrBadState, h.KVType, want.KVType)
	case h.Len > h.NCtx || h.Len > want.NCtx:
		return h, fmt.Errorf("%w: %d positions, this session's context is %d", ErrBadState, h.Len, want.NCtx)
	}
	return h, nil
}
