package gguf

import (
	"errors"
	"fmt"
)

// Sentinel errors: every parse failure wraps exactly one of them (test with
// errors.Is); the surrounding *FormatError names the file and offset.
var (
	ErrBadMagic     = errors.New("not a GGUF file (bad magic)")
	ErrVersion      = errors.New("unsupported GGUF version")
	ErrTruncated    = errors.New("truncated")
	ErrLimit        = errors.New("count or length beyond limit")
	ErrValueType    = errors.New("unknown metadata value type")
	ErrTensorType   = errors.New("unknown tensor type")
	ErrTensorBounds = errors.New("tensor data past end of file")
	ErrAlignment    = errors.New("bad alignment")
	ErrDims         = errors.New("bad tensor dimensions")
	ErrDuplicate    = errors.New("duplicate name")

	// Metadata accessors.
	ErrKeyNotFound = errors.New("key not found")
	ErrKeyType     = errors.New("key has another type")

	// Writer.
	ErrWriterState = errors.New("gguf writer used out of order")
)

// FormatError is a problem in a GGUF file: which file, where, and what.
type FormatError struct {
	File   string // path, "" when parsed from a reader
	Offset int64  // byte offset of the problem, -1 if not tied to one
	Err    error  // wraps one of the Err* sentinels
}

func (e *FormatError) Error() string {
	name := e.File
	if name == "" {
		name = "<reader>"
	}
	if e.Offset >= 0 {
		return fmt.Sprintf("gguf %s: at offset %d: %v", name, e.Offset, e.Err)
	}
	return fmt.Sprintf("gguf %s: %v", name, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// KeyError is a failed metadata lookup (missing key or wrong type).
type KeyError struct {
	Key  string
	Want string    // the wanted kind ("string", "unsigned integer", ...)
	Got  ValueType // the stored type when the key exists
	Err  error     // ErrKeyNotFound or ErrKeyType
}

func (e *KeyError) Error() string {
	if errors.Is(e.Err, ErrKeyNotFound) {
		return fmt.Sprintf("gguf metadata %q: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("gguf metadata %q: is %s, want %s", e.Key, e.Got, e.Want)
}

func (e *KeyError) Unwrap() error { return e.Err }
