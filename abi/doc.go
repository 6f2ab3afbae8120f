// Package abi defines version 1 of the edgellm policy ABI: the fixed-layout,
// little-endian Sensors and Decision structs that the host and a WebAssembly
// policy exchange through the policy's linear memory, and their encoders and
// decoders.
//
// ABI.md in this directory is the contract (exports, offsets, status codes,
// ownership, versioning). The offsets in it are generated from the same table
// the tests check the encoders against (see layout.go), so they cannot drift.
//
// # Use
//
// The host encodes the current readings with EncodeSensors into the guest's
// in_ptr buffer, pre-fills the guest's out_ptr buffer with the current state
// using EncodeDecision, calls decide, and reads the result back with
// DecodeDecision. A Go guest does the mirror image (policy-sdk does it for
// you). Encoders and decoders never allocate on success, use no reflection and
// no unsafe, and return an *Error for short buffers, another major version or
// a bad size header.
//
// # Safety and ownership
//
// The package has no mutable package state: every function is safe for
// concurrent use on distinct values. Sensors and Decision are plain values;
// the caller owns them and the byte buffers passed in.
//
// The package imports only the standard library (encoding/binary, math,
// strconv, unicode/utf8) and builds for GOOS=wasip1 GOARCH=wasm as well as for
// the host.
package abi
