// Package sdk is the Go guest SDK for edgellm policies: it turns a plain
// function
//
//	func Decide(s *abi.Sensors, d *abi.Decision)
//
// into a WebAssembly module that speaks the policy ABI (abi/ABI.md).
//
// # Writing a policy
//
// A policy is package main in its own directory:
//
//	package main
//
//	import (
//		"github.com/edgellm/edgellm/abi"
//		sdk "github.com/edgellm/edgellm/policy-sdk"
//	)
//
//	func init() { sdk.Register(Decide) }
//
//	// main is never called in a WASI reactor; it only satisfies package main.
//	func main() {}
//
//	func Decide(s *abi.Sensors, d *abi.Decision) { ... }
//
// and is built with
//
//	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -o policy.wasm .
//
// Registration happens in init because a -buildmode=c-shared module is a WASI
// reactor: the host calls _initialize (which runs package initializers) and
// then the exports, never main. The same Decide compiles natively, so
// `go test` tests it directly, and policy-sdk/policytest runs the same test
// table natively and against the built .wasm.
//
// # What the shim does
//
// On GOOS=wasip1 this package exports memory, edgellm_abi_version_major/minor,
// in_ptr, out_ptr and decide (shim_wasip1.go). It owns two static buffers (the
// encoded Sensors and Decision) and two package-level values; decide decodes
// the Sensors and the host's pre-filled Decision, calls the registered
// function, and encodes the Decision back. In the guest the decode and encode
// are bulk copies of the little-endian wire bytes (wire.go), proven equal to
// the abi codec by TestWireLayout, TestWireMatchesABI and TestWasmRoundTrip;
// natively Call uses the abi codec. Nothing is allocated per call
// (TestCallNoAlloc; TestWasmMemoryStable runs decide through wazero and
// checks linear memory does not grow).
//
// # Panics and state
//
// A panic in Decide is recovered: decide returns abi.StatusPanic with
// abi.ReasonGuestPanic and the start of the panic message in the reason text.
// The host then discards the instance, so package state a policy kept
// (hysteresis, sliding windows) is lost and the next instance starts from
// its initial values — as it does after any trap, deadline overrun or reload.
// A policy must therefore behave sensibly from a fresh state. Unrecoverable
// Go runtime errors (out of memory, concurrent map writes) still trap.
//
// Decide must not allocate per call: a Go guest's garbage collector never
// returns linear memory to the host. Keep buffers in package variables.
//
// A guest instance is single-threaded and never reentered; Register and Call
// are not safe for concurrent use (natively, test one policy per goroutine).
package sdk
