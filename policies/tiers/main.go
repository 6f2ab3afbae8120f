// Command tiers is the reference policy written twice, in Go (this file)
// and in AssemblyScript (tiers.ts), with the same logic, so that one test
// table (decide_test.go) checks both guest languages:
//
//   - emergency: the low-memory flag or a critical trim level puts the
//     lowest tier in service and the KV window down to EmergencyWindow;
//   - thermal: moderate or hotter steps one tier down (cheaper) per call;
//   - memory: headroom (available - threshold) under PressureMB steps one
//     tier down; over HeadroomMB, and not hot, steps one tier back up;
//   - leaving the emergency restores the full window.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o tiers.wasm .
package main

import (
	"github.com/edgellm/edgellm/abi"
	sdk "github.com/edgellm/edgellm/policy-sdk"
)

// Thresholds, shared with tiers.ts.
const (
	EmergencyWindow = 256  // KV window in an emergency, tokens
	PressureMB      = 256  // headroom below this: step down
	HeadroomMB      = 1024 // headroom above this: step back up
)

func init() { sdk.Register(Decide) }

// Decide applies the tiers logic to the pre-filled decision d.
func Decide(s *abi.Sensors, d *abi.Decision) {
	if s.Present&abi.PresentTiers == 0 || s.TiersAvailable <= 0 {
		return
	}
	last := s.TiersAvailable - 1
	low := s.Present&abi.PresentLowMemory != 0 && s.LowMemory
	trim := s.Present&abi.PresentTrimLevel != 0 && s.TrimLevel >= abi.TrimRunningCritical
	if low || trim {
		d.Tier, d.Window = last, EmergencyWindow
		d.SetReason(abi.ReasonLowMemory, "emergency")
		return
	}
	if d.Window == EmergencyWindow {
		d.Window = 0
	}
	hasThermal := s.Present&abi.PresentThermalStatus != 0
	hot := hasThermal && s.ThermalStatus >= abi.ThermalModerate
	cool := !hasThermal || s.ThermalStatus <= abi.ThermalLight
	hasMem := s.Present&(abi.PresentMemAvailable|abi.PresentMemThreshold) == abi.PresentMemAvailable|abi.PresentMemThreshold
	head := s.MemAvailableMB - s.MemThresholdMB
	switch {
	case hot && d.Tier < last:
		d.Tier++
		d.SetReason(abi.ReasonThermal, "hot")
	case hasMem && head < PressureMB && d.Tier < last:
		d.Tier++
		d.SetReason(abi.ReasonMemoryPressure, "low headroom")
	case cool && (!hasMem || head > HeadroomMB) && d.Tier > 0:
		d.Tier--
		d.SetReason(abi.ReasonMemoryHeadroom, "recovered")
	}
}

func main() {}
