//go:build wasip1

package sdk

import (
	"unsafe"

	"github.com/edgellm/edgellm/abi"
)

// The guest-owned buffers of the ABI (see abi/ABI.md, "Ownership"). They are
// static: their addresses never change for the life of the instance.
var (
	inBuf  [abi.SensorsSize]byte
	outBuf [abi.DecisionSize]byte
	xchg   Exchange
)

//go:wasmexport edgellm_abi_version_major
func exportVersionMajor() int32 { return abi.VersionMajor }

//go:wasmexport edgellm_abi_version_minor
func exportVersionMinor() int32 { return abi.VersionMinor }

//go:wasmexport in_ptr
func exportInPtr() int32 { return int32(uintptr(unsafe.Pointer(&inBuf[0]))) }

//go:wasmexport out_ptr
func exportOutPtr() int32 { return int32(uintptr(unsafe.Pointer(&outBuf[0]))) }

//go:wasmexport decide
func exportDecide() int32 { return int32(Call(registered, &xchg, inBuf[:], outBuf[:])) }
