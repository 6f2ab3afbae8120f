package kernels

/*
#include "llama.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// KV cache (llama_memory_*) operations on a Context. Ranges are half-open
// [p0, p1); p0 < 0 means from 0 and p1 < 0 means to the end, as in llama.cpp.
// Sequence ids are checked against NSeqMax before reaching C (llama.cpp
// asserts on them).

// ErrPartialRemove: the memory cannot remove part of a sequence (recurrent
// models); only whole sequences can be removed.
var ErrPartialRemove = errors.New("memory cannot remove a partial sequence range")

func (c *Context) checkSeq(seq int) error {
	if c == nil || c.ptr == nil {
		return ErrClosed
	}
	if seq < 0 || seq >= c.nSeqMax {
		return fmt.Errorf("%w: %d not in [0, %d)", ErrInvalidSeq, seq, c.nSeqMax)
	}
	if c.mem == nil {
		return fmt.Errorf("%w: this context has no KV memory", ErrInvalidArg)
	}
	return nil
}

// MemoryClear empties the KV cache of every sequence; data also zeroes the
// buffers.
func (c *Context) MemoryClear(data bool) error {
	if c == nil || c.ptr == nil {
		return ErrClosed
	}
	if c.mem != nil {
		C.llama_memory_clear(c.mem, C.bool(data))
	}
	return nil
}

// MemorySeqRm removes positions [p0, p1) of sequence seq; seq = -1 removes
// them from every sequence. ErrPartialRemove when the memory cannot.
func (c *Context) MemorySeqRm(seq, p0, p1 int) error {
	if seq != -1 {
		if err := c.checkSeq(seq); err != nil {
			return err
		}
	} else if c == nil || c.ptr == nil {
		return ErrClosed
	}
	if c.mem == nil {
		return nil
	}
	if !bool(C.llama_memory_seq_rm(c.mem, C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1))) {
		return ErrPartialRemove
	}
	return nil
}

// MemorySeqCp makes positions [p0, p1) of sequence src also belong to dst
// (shared cells, no copy of the data in a unified cache).
func (c *Context) MemorySeqCp(src, dst, p0, p1 int) error {
	if err := c.checkSeq(src); err != nil {
		return err
	}
	if err := c.checkSeq(dst); err != nil {
		return err
	}
	C.llama_memory_seq_cp(c.mem, C.llama_seq_id(src), C.llama_seq_id(dst), C.llama_pos(p0), C.llama_pos(p1))
	return nil
}

// MemorySeqKeep removes every sequence but seq.
func (c *Context) MemorySeqKeep(seq int) error {
	if err := c.checkSeq(seq); err != nil {
		return err
	}
	C.llama_memory_seq_keep(c.mem, C.llama_seq_id(seq))
	return nil
}

// MemorySeqAdd adds delta to the positions in [p0, p1) of sequence seq (a
// context shift; RoPE is re-applied lazily on the next Decode). It fails if
// the memory cannot shift (MemoryCanShift).
func (c *Context) MemorySeqAdd(seq, p0, p1, delta int) error {
	if err := c.checkSeq(seq); err != nil {
		return err
	}
	if !bool(C.llama_memory_can_shift(c.mem)) {
		return fmt.Errorf("%w: this model's memory cannot shift positions", ErrInvalidArg)
	}
	C.llama_memory_seq_add(c.mem, C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1), C.llama_pos(delta))
	return nil
}

// MemorySeqDiv divides the positions in [p0, p1) of sequence seq by d > 1
// (self-extend).
func (c *Context) MemorySeqDiv(seq, p0, p1, d int) error {
	if err := c.checkSeq(seq); err != nil {
		return err
	}
	if d < 1 {
		return fmt.Errorf("%w: divisor %d", ErrInvalidArg, d)
	}
	if !bool(C.llama_memory_can_shift(c.mem)) {
		return fmt.Errorf("%w: this model's memory cannot shift positions", ErrInvalidArg)
	}
	C.llama_memory_seq_div(c.mem, C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1), C.int(d))
	return nil
}

// MemorySeqPosMin is the smallest position of sequence seq, -1 if empty.
func (c *Context) MemorySeqPosMin(seq int) (int, error) {
	if err := c.checkSeq(seq); err != nil {
		return -1, err
	}
	return int(C.llama_memory_seq_pos_min(c.mem, C.llama_seq_id(seq))), nil
}

// MemorySeqPosMax is the largest position of sequence seq, -1 if empty.
func (c *Context) MemorySeqPosMax(seq int) (int, error) {
	if err := c.checkSeq(seq); err != nil {
		return -1, err
	}
	return int(C.llama_memory_seq_pos_max(c.mem, C.llama_seq_id(seq))), nil
}

// MemoryCanShift reports whether MemorySeqAdd / MemorySeqDiv are supported.
func (c *Context) MemoryCanShift() bool {
	if c == nil || c.ptr == nil || c.mem == nil {
		return false
	}
	return bool(C.llama_memory_can_shift(c.mem))
}
