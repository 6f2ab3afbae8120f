// Command default is edgellm's reference adaptive policy, built to
// default.wasm by `make -C policies`. It combines these controllers, each
// documented in decide.go or its own file:
//
//   - thermal: PowerManager status ≥ MODERATE downshifts one tier at once
//     (each further rise, one more tier);
//   - memory headroom: available memory against the low-memory threshold (or
//     total) and cgroup usage against its limit move the tier one step at a
//     time, with band hysteresis and at most one memory-driven change per
//     TierHoldSteps steps;
//   - repacked weights (repack.go): memory pressure releases the
//     anonymous repacked copy before any precision is lost; ample memory
//     at tier 0 takes it back;
//   - emergency: a critical trim level or the low-memory flag shrinks the KV
//     window to EmergencyWindow tokens, restored after RecoverSteps calm steps;
//   - speculation: K follows a sliding window of acceptance within [MinK, MaxK];
//   - throughput: per-layer precision is lowered (least sensitive layer
//     first) below the tok/s target and raised (most sensitive first) above
//     it when the device is not hot.
//
// Package state (hysteresis clocks, the acceptance window, the saved window)
// lives in st and is lost when the host re-instantiates the module; every
// controller starts safely from the zero state.
package main

import sdk "github.com/edgellm/edgellm/policy-sdk"

func init() { sdk.Register(Decide) }

// main is not called: the module is a WASI reactor (see policy-sdk).
func main() {}
