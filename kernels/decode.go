package kernels

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Decode evaluates batch b: writes its tokens' K/V into the cache and
// computes logits for the indices added with logits = true. The batch is
// validated first (size, token ids, positions, sequence ids) so bad input
// never reaches C. On the success path Decode does not allocate.
//
// Errors: ErrClosed, ErrEmptyBatch, ErrBatchTooLarge, ErrInvalidToken,
// ErrInvalidPos, ErrInvalidSeq (before C), or a *DecodeError matching
// ErrNoKVSlot, ErrAborted, ErrInvalidBatch or ErrDecodeFatal.
func (c *Context) Decode(b *Batch) error {
	if c == nil || c.ptr == nil {
		return ErrClosed
	}
	if b == nil || b.tok == nil {
		return ErrClosed
	}
	// Step 1: the previous outputs are gone whatever happens next.
	c.outN = 0
	n := int(b.c.n_tokens)
	if n == 0 {
		return ErrEmptyBatch
	}
	if n > c.nBatch {
		return fmt.Errorf("%w: %d tokens, n_batch %d", ErrBatchTooLarge, n, c.nBatch)
	}
	// Step 2: validate every entry against the context.
	for i := 0; i < n; i++ {
		if t := b.tok[i]; t < 0 || int(t) >= c.nVocab {
			return fmt.Errorf("%w: batch[%d] token %d not in [0, %d)", ErrInvalidToken, i, t, c.nVocab)
		}
		if p := b.pos[i]; p < 0 || int(p) >= c.nCtxSeq {
			return fmt.Errorf("%w: batch[%d] position %d not in [0, %d)", ErrInvalidPos, i, p, c.nCtxSeq)
		}
		k := int(b.nSeqID[i])
		if k < 1 || k > b.nSeq {
			return fmt.Errorf("%w: batch[%d] has %d sequence ids", ErrInvalidSeq, i, k)
		}
		ids := unsafe.Slice((*int32)(unsafe.Pointer(b.seqID[i])), k)
		for _, s := range ids {
			if s < 0 || int(s) >= c.nSeqMax {
				return fmt.Errorf("%w: batch[%d] sequence %d not in [0, %d)", ErrInvalidSeq, i, s, c.nSeqMax)
			}
		}
	}
	// Step 3: decode. A pending Interrupt stays set until a decode consumes it.
	C.edgellm_log_clear_error()
	c.sched.pass()
	rc := int(C.llama_decode(c.ptr, b.c))
	if rc == 0 && len(c.pools.retired) > 0 {
		c.closeRetired() // the backend now points at the new pools
	}
	if rc != 0 {
		if rc == 2 {
			C.edgellm_abort_set(c.abort, 0)
		}
		return &DecodeError{Code: rc, Detail: lastCError()}
	}
	// Step 4: remember which indices have logits, for Logits.
	for i := 0; i < n; i++ {
		c.out[i] = b.logits[i] != 0
	}
	c.outN = n
	return nil
}

// Logits copies the logits of batch index i of the last successful Decode
// into dst, which must hold NVocab floats. It does not allocate. It fails
// with ErrNoLogits if that index did not request logits, ErrShortBuffer if
// dst is too small.
func (c *Context) Logits(i int, dst []float32) error {
	if c == nil || c.ptr == nil {
		return ErrClosed
	}
	if i < 0 || i >= c.outN || !c.out[i] {
		return ErrNoLogits
	}
	if len(dst) < c.nVocab {
		return ErrShortBuffer
	}
	p := C.llama_get_logits_ith(c.ptr, C.int32_t(i))
	if p == nil {
		return ErrNoLogits
	}
	copy(dst[:c.nVocab], unsafe.Slice((*float32)(unsafe.Pointer(p)), c.nVocab))
	return nil
}

// Argmax returns the index of the largest value in logits (the greedy token);
// -1 for an empty slice. Ties go to the lowest index, as in llama.cpp's
// greedy sampler.
func Argmax(logits []float32) int32 {
	best := -1
	for i, v := range logits {
		if best < 0 || v > logits[best] {
			best = i
		}
	}
	return int32(best)
}
