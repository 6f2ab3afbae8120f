package kernels

/*
#include "llama.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Batch is a reusable set of tokens for Decode (llama_batch from
// llama_batch_init). Fill it with Add, Decode it, Clear it, refill: nothing is
// allocated after NewBatch. Release it with Close. A Batch is not safe for
// concurrent use and must not be modified while Decode reads it.
type Batch struct {
	c    C.struct_llama_batch
	size int // capacity in tokens
	nSeq int // capacity in sequence ids per token

	// Views of the C arrays (C memory, len size).
	tok    []int32
	pos    []int32
	nSeqID []int32
	seqID  []*C.llama_seq_id
	logits []int8
}

// NewBatch allocates a batch of up to nTokens tokens, each belonging to at
// most nSeq sequences (nSeq is usually 1).
func NewBatch(nTokens, nSeq int) (*Batch, error) {
	if nTokens <= 0 || nTokens > 1<<24 || nSeq <= 0 || nSeq > int(C.llama_max_parallel_sequences()) {
		return nil, fmt.Errorf("new batch: %w: nTokens %d, nSeq %d", ErrInvalidArg, nTokens, nSeq)
	}
	b := &Batch{c: C.llama_batch_init(C.int32_t(nTokens), 0, C.int32_t(nSeq)), size: nTokens, nSeq: nSeq}
	b.tok = unsafe.Slice((*int32)(unsafe.Pointer(b.c.token)), nTokens)
	b.pos = unsafe.Slice((*int32)(unsafe.Pointer(b.c.pos)), nTokens)
	b.nSeqID = unsafe.Slice((*int32)(unsafe.Pointer(b.c.n_seq_id)), nTokens)
	b.seqID = unsafe.Slice(b.c.seq_id, nTokens)
	b.logits = unsafe.Slice((*int8)(unsafe.Pointer(b.c.logits)), nTokens)
	b.c.n_tokens = 0
	return b, nil
}

// Close frees the batch. A no-op on a closed or nil Batch.
func (b *Batch) Close() error {
	if b == nil || b.tok == nil {
		return nil
	}
	C.llama_batch_free(b.c)
	b.c = C.struct_llama_batch{}
	b.tok, b.pos, b.nSeqID, b.seqID, b.logits = nil, nil, nil, nil, nil
	return nil
}

// Clear empties the batch for refilling.
func (b *Batch) Clear() {
	if b != nil && b.tok != nil {
		b.c.n_tokens = 0
	}
}

// Len is the number of tokens in the batch.
func (b *Batch) Len() int {
	if b == nil || b.tok == nil {
		return 0
	}
	return int(b.c.n_tokens)
}

// Cap is the capacity given to NewBatch.
func (b *Batch) Cap() int {
	if b == nil || b.tok == nil {
		return 0
	}
	return b.size
}

// Add appends token tok at position pos of sequence seq; logits requests its
// output row (readable with Context.Logits at this batch index after Decode).
// It fails with ErrBatchFull at capacity; ids are checked by Decode.
func (b *Batch) Add(tok int32, pos, seq int, logits bool) error {
	if b == nil || b.tok == nil {
		return ErrClosed
	}
	i := int(b.c.n_tokens)
	if i >= b.size {
		return ErrBatchFull
	}
	b.tok[i] = tok
	b.pos[i] = int32(pos)
	b.nSeqID[i] = 1
	*(*int32)(unsafe.Pointer(b.seqID[i])) = int32(seq)
	b.logits[i] = boolInt8(logits)
	b.c.n_tokens++
	return nil
}

// AddSeqs appends a token shared by several sequences (e.g. a common prompt
// prefix): 1 <= len(seqs) <= the nSeq given to NewBatch.
func (b *Batch) AddSeqs(tok int32, pos int, seqs []int, logits bool) error {
	if b == nil || b.tok == nil {
		return ErrClosed
	}
	if len(seqs) == 0 || len(seqs) > b.nSeq {
		return ErrInvalidSeq
	}
	i := int(b.c.n_tokens)
	if i >= b.size {
		return ErrBatchFull
	}
	b.tok[i] = tok
	b.pos[i] = int32(pos)
	b.nSeqID[i] = int32(len(seqs))
	ids := unsafe.Slice((*int32)(unsafe.Pointer(b.seqID[i])), b.nSeq)
	for j, s := range seqs {
		ids[j] = int32(s)
	}
	b.logits[i] = boolInt8(logits)
	b.c.n_tokens++
	return nil
}

// SetLogits changes whether batch index i produces logits.
func (b *Batch) SetLogits(i int, on bool) error {
	if b == nil || b.tok == nil {
		return ErrClosed
	}
	if i < 0 || i >= int(b.c.n_tokens) {
		return ErrInvalidArg
	}
	b.logits[i] = boolInt8(on)
	return nil
}

// Token returns the token and position at batch index i (i < Len).
func (b *Batch) Token(i int) (tok int32, pos int) {
	return b.tok[i], int(b.pos[i])
}

func boolInt8(v bool) int8 {
	if v {
		return 1
	}
	return 0
}
