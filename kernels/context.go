package kernels

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/edgellm/edgellm/host/engine"
)

// kvGGML pairs each of the engine contract's KV types with its ggml type
// and block size (elements per block). It is the one place a KV type meets
// ggml: llama.cpp contexts and the native engine's KV arena both convert
// through KVGGMLType and GGMLKVType.
var kvGGML = [...]struct {
	t     engine.KVType
	g     GGMLType
	block int
}{{engine.KVF16, GGMLTypeF16, 1}, {engine.KVF32, GGMLTypeF32, 1}, {engine.KVQ8_0, GGMLTypeQ8_0, 32}, {engine.KVQ4_0, GGMLTypeQ4_0, 32}}

// KVGGMLType is the ggml type and block size of the KV type t ("" is f16).
func KVGGMLType(t engine.KVType) (GGMLType, int, error) {
	if t == "" {
		t = engine.KVF16
	}
	for _, p := range kvGGML {
		if p.t == t {
			return p.g, p.block, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: unknown KV type %q (want f16, f32, q8_0 or q4_0)", ErrInvalidArg, t)
}

// GGMLKVType is the KV type whose ggml type is g ("" if none is).
func GGMLKVType(g GGMLType) engine.KVType {
	for _, p := range kvGGML {
		if p.g == g {
			return p.t
		}
	}
	return ""
}

// FlashAttn selects flash attention (flash_attn_type).
type FlashAttn int

// Flash attention modes. The zero value lets llama.cpp decide.
const (
	FlashAttnAuto FlashAttn = iota
	FlashAttnOn
	FlashAttnOff
)

// DefaultNCtx is the context length used when ContextParams.NCtx is 0 and the
// model was trained with a longer one.
const DefaultNCtx = 4096

// ContextParams configures NewContext. Zero values pick the defaults noted.
type ContextParams struct {
	// NCtx is the KV cache size in tokens (all sequences together unless
	// KVUnified is false and NSeqMax > 1, where each gets NCtx/NSeqMax).
	// 0 = min(DefaultNCtx, the model's NCtxTrain). Above NCtxTrain is an error.
	// llama.cpp rounds it up to a multiple of 256; Context.NCtx is the result.
	NCtx int
	// NBatch is the most tokens one Decode may take. 0 = 512; capped at NCtx.
	NBatch int
	// NUBatch is the physical batch size. 0 = NBatch; capped at NBatch.
	NUBatch int
	// NSeqMax is the number of distinct sequences. 0 = 1.
	NSeqMax int
	// Threads for single-token decode; 0 = runtime.NumCPU().
	Threads int
	// ThreadsBatch for prompt batches; 0 = Threads.
	ThreadsBatch int
	// TypeK and TypeV are the KV cache element types; "" = f16. Quantized
	// types need the head size to be a multiple of 32, and a quantized V
	// needs flash attention (FlashAttnAuto or FlashAttnOn).
	TypeK, TypeV engine.KVType
	// FlashAttn selects flash attention; the zero value is FlashAttnAuto.
	FlashAttn FlashAttn
	// KVUnified shares one KV buffer across sequences (kv_unified).
	KVUnified bool
	// NoPerf turns off the performance counters read by Perf.
	NoPerf bool
}

// Context is a llama.cpp inference context (llama_context): KV cache, compute
// buffers and the logits of the last Decode. Create it with NewContext and
// release it with Close; the Context must be closed before its Model. A
// Context is not safe for concurrent use, except Interrupt.
type Context struct {
	ptr   *C.struct_llama_context
	mem   C.llama_memory_t
	m     *Model
	abort *C.int // C memory: the flag edgellm_abort_cb polls
	sched schedPass
	pools ctxPools // contextpool.go

	nCtx, nCtxSeq, nBatch, nUBatch, nSeqMax, nVocab int
	typeK, typeV                                    engine.KVType

	// Outputs of the last successful Decode: out[i] says whether batch index
	// i has logits, for i < outN. Allocated once (len nBatch).
	outN int
	out  []bool
}

// NewContext creates a context on m. Parameters are validated first; errors
// wrap ErrClosed, ErrInvalidArg or ErrLoad (llama_init_from_model failed).
func NewContext(m *Model, p ContextParams) (*Context, error) {
	if m == nil {
		return nil, fmt.Errorf("new context: %w", ErrClosed)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ptr == nil {
		return nil, fmt.Errorf("new context: model %w", ErrClosed)
	}
	if m.params.VocabOnly {
		return nil, fmt.Errorf("new context on %s: %w: the model was loaded vocab-only", m.path, ErrInvalidArg)
	}
	cp, err := m.contextParams(p)
	if err != nil {
		return nil, fmt.Errorf("new context on %s: %w", m.path, err)
	}
	abort := (*C.int)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int(0)))))
	cp.abort_callback = C.ggml_abort_callback(C.edgellm_abort_cb)
	cp.abort_callback_data = unsafe.Pointer(abort)

	clearCError()
	ptr := C.llama_init_from_model(m.ptr, cp)
	if ptr == nil {
		C.free(unsafe.Pointer(abort))
		return nil, &PathError{Op: "new context on", Path: m.path, Err: ErrLoad, Detail: lastCError()}
	}
	c := &Context{
		ptr:     ptr,
		mem:     C.llama_get_memory(ptr),
		m:       m,
		abort:   abort,
		nCtx:    int(C.llama_n_ctx(ptr)),
		nCtxSeq: int(C.llama_n_ctx_seq(ptr)),
		nBatch:  int(C.llama_n_batch(ptr)),
		nUBatch: int(C.llama_n_ubatch(ptr)),
		nSeqMax: int(C.llama_n_seq_max(ptr)),
		nVocab:  m.nVocab,
		typeK:   orF16(p.TypeK),
		typeV:   orF16(p.TypeV),
	}
	c.out = make([]bool, c.nBatch)
	if err := c.setPools(int(cp.n_threads), int(cp.n_threads_batch)); err != nil {
		C.llama_free(ptr)
		C.free(unsafe.Pointer(abort))
		return nil, fmt.Errorf("new context on %s: %w", m.path, err)
	}
	m.nCtx++
	return c, nil
}

func orF16(t engine.KVType) engine.KVType {
	if t == "" {
		return engine.KVF16
	}
	return t
}

// contextParams validates p against the model and fills llama_context_params.
// m.mu is held.
func (m *Model) contextParams(p ContextParams) (C.struct_llama_context_params, error) {
	cp := C.llama_context_default_params()
	if p.NCtx < 0 || p.NBatch < 0 || p.NUBatch < 0 || p.NSeqMax < 0 || p.Threads < 0 || p.ThreadsBatch < 0 {
		return cp, fmt.Errorf("%w: negative size or thread count in %+v", ErrInvalidArg, p)
	}
	nCtx := p.NCtx
	if nCtx == 0 {
		nCtx = DefaultNCtx
		if m.nCtxTr > 0 {
			nCtx = min(nCtx, m.nCtxTr)
		}
	}
	if m.nCtxTr > 0 && nCtx > m.nCtxTr {
		return cp, fmt.Errorf("%w: n_ctx %d is above the model's training context %d", ErrInvalidArg, nCtx, m.nCtxTr)
	}
	nBatch := p.NBatch
	if nBatch == 0 {
		nBatch = 512
	}
	nBatch = min(nBatch, nCtx)
	nUBatch := p.NUBatch
	if nUBatch == 0 {
		nUBatch = nBatch
	}
	nUBatch = min(nUBatch, nBatch)
	nSeq := max(p.NSeqMax, 1)
	if maxSeq := int(C.llama_max_parallel_sequences()); nSeq > maxSeq {
		return cp, fmt.Errorf("%w: n_seq_max %d is above llama.cpp's limit %d", ErrInvalidArg, nSeq, maxSeq)
	}
	if !p.KVUnified && nCtx/nSeq == 0 {
		return cp, fmt.Errorf("%w: n_ctx %d leaves no room for %d sequences", ErrInvalidArg, nCtx, nSeq)
	}
	threads := p.Threads
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	threadsBatch := p.ThreadsBatch
	if threadsBatch == 0 {
		threadsBatch = threads
	}
	tk, bk, err := KVGGMLType(p.TypeK)
	if err != nil {
		return cp, fmt.Errorf("K cache: %w", err)
	}
	tv, bv, err := KVGGMLType(p.TypeV)
	if err != nil {
		return cp, fmt.Errorf("V cache: %w", err)
	}
	// llama.cpp views the cache per head: a quantized block may not straddle heads.
	if hk := m.headDimK(); bk > 1 && hk%bk != 0 {
		return cp, fmt.Errorf("%w: K cache type %s needs a head size that is a multiple of %d; this model's is %d", ErrInvalidArg, p.TypeK, bk, hk)
	}
	if hv := m.headDimV(); bv > 1 && hv%bv != 0 {
		return cp, fmt.Errorf("%w: V cache type %s needs a head size that is a multiple of %d; this model's is %d", ErrInvalidArg, p.TypeV, bv, hv)
	}
	if bv > 1 && p.FlashAttn == FlashAttnOff {
		return cp, fmt.Errorf("%w: a quantized V cache (%s) needs flash attention", ErrInvalidArg, p.TypeV)
	}
	switch p.FlashAttn {
	case FlashAttnAuto:
		cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_AUTO
	case FlashAttnOn:
		cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED
	case FlashAttnOff:
		cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_DISABLED
	default:
		return cp, fmt.Errorf("%w: unknown flash attention mode %d", ErrInvalidArg, p.FlashAttn)
	}
	cp.n_ctx = C.uint32_t(nCtx)
	cp.n_batch = C.uint32_t(nBatch)
	cp.n_ubatch = C.uint32_t(nUBatch)
	cp.n_seq_max = C.uint32_t(nSeq)
	cp.n_threads = C.int32_t(threads)
	cp.n_threads_batch = C.int32_t(threadsBatch)
	cp.type_k = C.enum_ggml_type(tk)
	cp.type_v = C.enum_ggml_type(tv)
	cp.kv_unified = C.bool(p.KVUnified)
	cp.no_perf = C.bool(p.NoPerf)
	return cp, nil
}

// Close frees the context. A no-op on a closed or nil Context.
func (c *Context) Close() error {
	if c == nil || c.ptr == nil {
		return nil
	}
	C.llama_free(c.ptr)
	C.free(unsafe.Pointer(c.abort))
	c.closePools()
	c.ptr, c.mem, c.abort = nil, nil, nil
	c.outN = 0
	c.m.mu.Lock()
	c.m.nCtx--
	c.m.mu.Unlock()
	return nil
}

// Model is the model the context was created from.
func (c *Context) Model() *Model { return c.m }

// NCtx is the KV cache size in tokens (llama_n_ctx).
func (c *Context) NCtx() int { return c.nCtx }

// NCtxSeq is the KV capacity of one sequence (llama_n_ctx_seq): positions
// must be below it.
func (c *Context) NCtxSeq() int { return c.nCtxSeq }

// NBatch is the most tokens one Decode may take.
func (c *Context) NBatch() int { return c.nBatch }

// NUBatch is the physical batch size.
func (c *Context) NUBatch() int { return c.nUBatch }

// NSeqMax is the number of sequences; sequence ids are [0, NSeqMax).
func (c *Context) NSeqMax() int { return c.nSeqMax }

// NVocab is the length of a logits row.
func (c *Context) NVocab() int { return c.nVocab }

// KVTypes are the K and V cache element types.
func (c *Context) KVTypes() (k, v engine.KVType) { return c.typeK, c.typeV }

// Threads returns the thread counts for decode and for batches.
func (c *Context) Threads() (threads, threadsBatch int) {
	if c == nil || c.ptr == nil {
		return 0, 0
	}
	return int(C.llama_n_threads(c.ptr)), int(C.llama_n_threads_batch(c.ptr))
}

// SetThreads changes the thread counts; 0 = runtime.NumCPU(). The context's
// threadpools are replaced by pools of exactly these sizes (contextpool.go).
func (c *Context) SetThreads(threads, threadsBatch int) error {
	if c == nil || c.ptr == nil {
		return ErrClosed
	}
	if threads < 0 || threadsBatch < 0 {
		return fmt.Errorf("%w: negative thread count", ErrInvalidArg)
	}
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	if threadsBatch == 0 {
		threadsBatch = runtime.NumCPU()
	}
	if err := c.setPools(threads, threadsBatch); err != nil {
		return err
	}
	C.llama_set_n_threads(c.ptr, C.int32_t(threads), C.int32_t(threadsBatch))
	return nil
}

// Interrupt makes the Decode in progress (or the next one, if none is
// running) stop between graph nodes and fail with ErrAborted. Safe to call
// from another goroutine while Decode runs; Close must not race with it.
func (c *Context) Interrupt() {
	if c == nil || c.abort == nil {
		return
	}
	C.edgellm_abort_set(c.abort, 1)
}
