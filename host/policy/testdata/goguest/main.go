// Command goguest is the policy runtime's Go test guest (used until
// policies/default exists): the same rule as sensor.wat — tier 2 below
// 1000 MiB available, else tier 0 — built with policy-sdk as a WASI reactor.
package main

import (
	"github.com/edgellm/edgellm/abi"
	sdk "github.com/edgellm/edgellm/policy-sdk"
)

func init() { sdk.Register(decide) }

func main() {}

func decide(s *abi.Sensors, d *abi.Decision) {
	if s.MemAvailableMB < 1000 {
		d.Tier = 2
		d.SetReason(abi.ReasonMemoryPressure, "low memory")
		return
	}
	d.Tier = 0
}
