package abi

import "strconv"

// ErrorKind classifies an *Error. The kinds are constants, so they can be
// compared with errors.Is without any package variable.
type ErrorKind string

// Error kinds returned by the encoders and decoders.
const (
	// ErrShortBuffer: the buffer is shorter than the struct (or its header).
	ErrShortBuffer ErrorKind = "buffer too short"
	// ErrMajorVersion: the struct or guest speaks another ABI major.
	ErrMajorVersion ErrorKind = "unsupported ABI major version"
	// ErrMinorVersion: a minor newer than this package; its size is unknown here.
	ErrMinorVersion ErrorKind = "unknown ABI minor version"
	// ErrBadSize: the size in the header is smaller than the base (x.0)
	// size of the struct, or absurdly large (> 1 MiB).
	ErrBadSize ErrorKind = "bad struct size in header"
)

// Error implements error so a kind can be used as an errors.Is target.
func (k ErrorKind) Error() string { return "abi: " + string(k) }

// Error is a failure to encode or decode an ABI struct.
type Error struct {
	Kind   ErrorKind
	Struct string // "Sensors", "Decision" or "header"
	Got    int    // bytes available, major found, or size found
	Want   int    // bytes needed, major expected, or minimum size
}

func (e *Error) Error() string {
	s := "abi: " + e.Struct + ": " + string(e.Kind)
	switch e.Kind {
	case ErrShortBuffer:
		return s + " (" + strconv.Itoa(e.Got) + " bytes, need " + strconv.Itoa(e.Want) + ")"
	case ErrMajorVersion:
		return s + " " + strconv.Itoa(e.Got) + " (this host speaks " + strconv.Itoa(e.Want) + ")"
	case ErrMinorVersion:
		return s + " " + strconv.Itoa(e.Got) + " (newest known " + strconv.Itoa(e.Want) + ")"
	case ErrBadSize:
		return s + " " + strconv.Itoa(e.Got) + " (minimum " + strconv.Itoa(e.Want) + ")"
	}
	return s
}

// Unwrap returns the kind, so errors.Is(err, abi.ErrShortBuffer) works.
func (e *Error) Unwrap() error { return e.Kind }
