// Command echo is the SDK's round-trip test policy: Decide re-encodes the
// Sensors and the pre-filled Decision it was given with abi's reference
// encoders into two static buffers the host reads through extra exports,
// and leaves the Decision unchanged (so the shim's encode is checked too).
// Only wasm_test.go uses it.
package main

import (
	"unsafe"

	"github.com/edgellm/edgellm/abi"
	sdk "github.com/edgellm/edgellm/policy-sdk"
)

func init() { sdk.Register(Decide) }

func main() {}

var (
	seenSensors  [abi.SensorsSize]byte
	seenDecision [abi.DecisionSize]byte
)

//go:wasmexport seen_sensors_ptr
func seenSensorsPtr() int32 { return int32(uintptr(unsafe.Pointer(&seenSensors[0]))) }

//go:wasmexport seen_decision_ptr
func seenDecisionPtr() int32 { return int32(uintptr(unsafe.Pointer(&seenDecision[0]))) }

// Wire offsets of the Sensors bools (abi/ABI.md).
const offLowMemory, offCharging = 44, 47

// Decide records what the guest saw. The bools are recorded as the bytes in
// memory, not through the encoder (which writes any nonzero byte as 1), so a
// bool that is neither 0 nor 1 shows.
func Decide(s *abi.Sensors, d *abi.Decision) {
	_ = abi.EncodeSensors(seenSensors[:], s)
	seenSensors[offLowMemory] = *(*uint8)(unsafe.Pointer(&s.LowMemory))
	seenSensors[offCharging] = *(*uint8)(unsafe.Pointer(&s.Charging))
	_ = abi.EncodeDecision(seenDecision[:], d)
}
