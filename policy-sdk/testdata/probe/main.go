// Command probe is the SDK's test policy: it exercises every part of the
// Sensors and Decision so that a wasm round trip is checked field by field,
// keeps state across calls (a call counter), and panics on request.
package main

import (
	"github.com/edgellm/edgellm/abi"
	sdk "github.com/edgellm/edgellm/policy-sdk"
)

func init() { sdk.Register(Decide) }

func main() {}

// calls counts calls since the instance started (state lost on re-instantiation).
var calls int32

// PanicCtxLen is the CtxLen that makes Decide panic.
const PanicCtxLen = -7

// Decide derives every Decision field from the Sensors.
func Decide(s *abi.Sensors, d *abi.Decision) {
	if s.CtxLen == PanicCtxLen {
		panic("probe: asked to panic")
	}
	calls++
	d.Tier = s.CurTier + 1
	d.SpecK = int32(s.Step % 9)
	d.Window = s.MemAvailableMB
	d.Anchors = int32(s.ThermalStatus)
	d.Threads = calls
	d.CadenceSteps = int32(s.TrimLevel)
	d.KVType = s.CurKVType
	for i := range d.LayerBits {
		d.LayerBits[i] = s.CurLayerBits[i] + 1
		d.LayerWindowScale[i] = s.LayerLatencyUS[i] / 2
	}
	if s.LowMemory {
		d.SetReason(abi.ReasonLowMemory, "low memory")
	} else {
		d.SetReason(abi.ReasonPolicy, "probe")
	}
}
