// Package capi is the C API of edgellm: the //export functions that
// cmd/libedgellm links into libedgellm.so.
//
// include/edgellm.h is the contract (written by hand, not cgo's export
// header): opaque handles with init/free pairs, a status code from every
// call with a thread-local message, structs that carry their own size, and
// generation that streams tokens through a C callback and can be cancelled
// from another thread. Everything here is a thin layer over the host
// package: load (host.Load), sessions, generation (host.Generate), a policy
// with the app's pushed sensors (host.AttachPolicy, sensors.Platform).
//
// No Go pointer crosses into C: handles are numbers in a table (a freed or
// forged one is an error, never a crash), token text is copied into a
// C-allocated buffer, and the caller's user pointer is a C pointer that Go
// only hands back.
package capi

import (
	"os"

	"github.com/edgellm/edgellm/host"
)

// llama.cpp's and ggml's own messages: errors only, on the process's
// stderr (an app that wants more reads edgellm_last_error).
func init() { host.SetLog(os.Stderr, host.LogError) }
