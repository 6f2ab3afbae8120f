package kernels

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every failure the package reports matches one of these with
// errors.Is; the wrapping error carries the details (path, index, C code).
var (
	// ErrClosed: the handle is nil or was closed.
	ErrClosed = errors.New("kernels: handle is nil or closed")
	// ErrInUse: a Model still has open Contexts.
	ErrInUse = errors.New("kernels: model still has open contexts")

	// ErrNotGGUF: the file does not start with a valid GGUF header.
	ErrNotGGUF = errors.New("not a GGUF file")
	// ErrLoad: llama.cpp could not load the model (llama_model_load_from_file
	// returned NULL) or create a context (llama_init_from_model returned NULL).
	ErrLoad = errors.New("load failed")

	// ErrInvalidArg: a parameter was rejected before reaching C.
	ErrInvalidArg = errors.New("invalid argument")
	// ErrInvalidToken: a token id outside [0, n_vocab).
	ErrInvalidToken = errors.New("token id out of range")
	// ErrInvalidSeq: a sequence id outside [0, n_seq_max).
	ErrInvalidSeq = errors.New("sequence id out of range")
	// ErrInvalidPos: a position outside [0, n_ctx_seq).
	ErrInvalidPos = errors.New("position out of range")
	// ErrBatchFull: Batch.Add beyond the capacity given to NewBatch.
	ErrBatchFull = errors.New("batch is full")
	// ErrBatchTooLarge: a batch holds more tokens than the context's n_batch.
	ErrBatchTooLarge = errors.New("batch larger than n_batch")
	// ErrEmptyBatch: Decode of a batch with no tokens.
	ErrEmptyBatch = errors.New("batch is empty")
	// ErrNoLogits: Logits(i) for a token whose logits were not requested in
	// the last successful Decode.
	ErrNoLogits = errors.New("no logits for this batch index")
	// ErrShortBuffer: a destination slice is smaller than needed.
	ErrShortBuffer = errors.New("buffer too small")

	// ErrNoKVSlot: llama_decode returned 1, no free KV slot for the batch.
	// Free cells (MemorySeqRm) or use a larger context, then retry.
	ErrNoKVSlot = errors.New("no KV cache slot for the batch")
	// ErrAborted: llama_decode returned 2, aborted by Context.Interrupt.
	// Memory holds the ubatches processed before the abort.
	ErrAborted = errors.New("decode aborted")
	// ErrInvalidBatch: llama_decode returned -1, llama.cpp rejected the batch
	// (e.g. positions not continuing the sequence's KV).
	ErrInvalidBatch = errors.New("batch rejected by llama.cpp")
	// ErrDecodeFatal: llama_decode returned < -1 (allocation or compute
	// failure). The context should be discarded.
	ErrDecodeFatal = errors.New("decode failed")

	// ErrState: llama_state_seq_get_data / set_data failed.
	ErrState = errors.New("sequence state transfer failed")
	// ErrQuantize: llama_model_quantize failed.
	ErrQuantize = errors.New("quantize failed")
)

// DecodeError is a non-zero return code of llama_decode. It matches
// ErrNoKVSlot (1), ErrAborted (2), ErrInvalidBatch (-1) or ErrDecodeFatal
// (< -1) with errors.Is.
type DecodeError struct {
	Code   int    // llama_decode's return value
	Detail string // llama.cpp's first error line, if it logged one
}

func (e *DecodeError) Error() string {
	s := fmt.Sprintf("llama_decode: %v (code %d)", e.Unwrap(), e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the sentinel for the code.
func (e *DecodeError) Unwrap() error {
	switch {
	case e.Code == 1:
		return ErrNoKVSlot
	case e.Code == 2:
		return ErrAborted
	case e.Code == -1:
		return ErrInvalidBatch
	default:
		return ErrDecodeFatal
	}
}

// PathError is a failure tied to a file: loading a model, quantizing.
type PathError struct {
	Op     string // "load", "quantize"
	Path   string
	Err    error  // a sentinel (ErrNotGGUF, ErrLoad, ErrQuantize) or an *os.PathError
	Detail string // llama.cpp's first error line, if it logged one
}

func (e *PathError) Error() string {
	s := e.Op + " " + e.Path + ": " + e.Err.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *PathError) Unwrap() error { return e.Err }
