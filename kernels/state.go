package kernels

/*
#include "llama.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Per-sequence state (llama_state_seq_*): the KV cells of one sequence in
// llama.cpp's serialised form. The buffers are the caller's — typically a
// memfd mapping — and are read or written in place, never copied to the Go
// heap. A state restores into a context of the same model with the same KV
// types and the same stream layout (NSeqMax when KVUnified is false).

// StateSeqSize is the number of bytes StateSeqGet needs for sequence seq.
// llama.cpp computes it by a dry-run serialisation (O(cells)).
func (c *Context) StateSeqSize(seq int) (int, error) {
	if err := c.checkSeq(seq); err != nil {
		return 0, err
	}
	return int(C.llama_state_seq_get_size(c.ptr, C.llama_seq_id(seq))), nil
}

// StateSeqGet writes the state of sequence seq into dst and returns the
// number of bytes written. ErrShortBuffer (with the size needed) if dst is
// too small.
func (c *Context) StateSeqGet(dst []byte, seq int) (int, error) {
	if err := c.checkSeq(seq); err != nil {
		return 0, err
	}
	if len(dst) == 0 {
		need, _ := c.StateSeqSize(seq)
		return 0, fmt.Errorf("%w: state of sequence %d needs %d bytes, have 0", ErrShortBuffer, seq, need)
	}
	clearCError()
	n := int(C.llama_state_seq_get_data(c.ptr, (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.size_t(len(dst)), C.llama_seq_id(seq)))
	if n == 0 {
		detail := lastCError()
		if need, _ := c.StateSeqSize(seq); need > len(dst) {
			return 0, fmt.Errorf("%w: state of sequence %d needs %d bytes, have %d", ErrShortBuffer, seq, need, len(dst))
		}
		return 0, fmt.Errorf("%w: get sequence %d: %s", ErrState, seq, detail)
	}
	return n, nil
}

// StateSeqSet restores sequence seq from src (written by StateSeqGet),
// replacing what the sequence held. On failure the sequence is left empty
// and the error wraps ErrState.
func (c *Context) StateSeqSet(src []byte, seq int) error {
	if err := c.checkSeq(seq); err != nil {
		return err
	}
	if len(src) == 0 {
		return fmt.Errorf("%w: empty state for sequence %d", ErrState, seq)
	}
	c.outN = 0
	clearCError()
	n := int(C.llama_state_seq_set_data(c.ptr, (*C.uint8_t)(unsafe.Pointer(&src[0])), C.size_t(len(src)), C.llama_seq_id(seq)))
	if n == 0 {
		detail := lastCError()
		// llama.cpp may have restored some cells before failing (a truncated
		// buffer throws past its own cleanup): leave the sequence empty.
		C.llama_memory_seq_rm(c.mem, C.llama_seq_id(seq), -1, -1)
		return fmt.Errorf("%w: set sequence %d from %d bytes: %s", ErrState, seq, len(src), detail)
	}
	return nil
}
