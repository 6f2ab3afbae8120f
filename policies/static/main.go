// Command static is a fixed policy for comparisons, built to static.wasm by
// `make -C policies`. By default it keeps everything as the host pre-filled
// (the engine runs unadapted). Built with
//
//	-ldflags '-X main.fixedTier=N'
//
// it pins the tier to N (clamped to the tiers available) and changes nothing
// else. It keeps no state.
package main

import (
	"github.com/edgellm/edgellm/abi"
	sdk "github.com/edgellm/edgellm/policy-sdk"
)

func init() { sdk.Register(Decide) }

// main is not called: the module is a WASI reactor (see policy-sdk).
func main() {}

// fixedTier is set at link time; "" keeps the pre-filled tier.
var fixedTier string

// tier is fixedTier parsed once: -1 when unset or not a non-negative integer.
var tier = parseTier(fixedTier)

func parseTier(s string) int32 {
	if s == "" || len(s) > 4 {
		return -1
	}
	var n int32
	for _, c := range s {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int32(c-'0')
	}
	return n
}

// Decide pins the tier when configured; otherwise it leaves d as pre-filled.
func Decide(s *abi.Sensors, d *abi.Decision) {
	if tier < 0 {
		return
	}
	t := tier
	if s.Has(abi.PresentTiers) && s.TiersAvailable > 0 {
		t = min(t, s.TiersAvailable-1)
	}
	if d.Tier != t {
		d.Tier = t
		d.SetReason(abi.ReasonFixed, "static: fixed tier")
	}
}
