package sdk

import (
	"github.com/edgellm/edgellm/abi"
)

// DecideFunc is a policy: it reads the sensors and changes the fields of the
// pre-filled decision it wants to change. It must not keep s or d.
type DecideFunc func(s *abi.Sensors, d *abi.Decision)

// registered is the policy of this module (set once, from init).
var registered DecideFunc

// Register installs the module's policy. Call it once, from an init function
// of package main. A second call replaces the first (the last one wins).
func Register(f DecideFunc) { registered = f }

// Registered returns the registered policy, or nil.
func Registered() DecideFunc { return registered }

// Exchange holds the decoded values and is reused across calls so a call does
// not allocate. The zero value is ready to use.
type Exchange struct {
	Sensors  abi.Sensors
	Decision abi.Decision
}

// Call runs one ABI call: decode the Sensors in in and the pre-filled
// Decision in out into x, run f, encode the Decision back into out. It
// returns abi.StatusOK, StatusBadSensors / StatusBadDecision for buffers it
// cannot decode, or StatusPanic when f panics (or is nil), in which case out
// holds a Decision with ReasonGuestPanic and the panic message as reason.
//
// The wasip1 shim calls Call on its static buffers; native tests may call it
// to exercise exactly the guest's code path.
func Call(f DecideFunc, x *Exchange, in, out []byte) (st abi.Status) {
	if err := abi.DecodeSensors(in, &x.Sensors); err != nil {
		return abi.StatusBadSensors
	}
	if err := abi.DecodeDecision(out, &x.Decision); err != nil {
		return abi.StatusBadDecision
	}
	defer func() {
		if r := recover(); r != nil {
			x.Decision.SetReason(abi.ReasonGuestPanic, panicText(r))
			_ = abi.EncodeDecision(out, &x.Decision)
			st = abi.StatusPanic
		}
	}()
	if f == nil {
		panic("edgellm policy-sdk: no policy registered (call sdk.Register in init)")
	}
	f(&x.Sensors, &x.Decision)
	// out was long enough to decode a Decision, so it is long enough to encode one.
	_ = abi.EncodeDecision(out, &x.Decision)
	return abi.StatusOK
}

// panicText renders a recovered value without fmt (which would pull a large
// package into every guest). Only the failure path allocates.
func panicText(r any) string {
	switch v := r.(type) {
	case string:
		return "panic: " + v
	case error:
		return "panic: " + v.Error()
	case interface{ String() string }:
		return "panic: " + v.String()
	}
	return "panic"
}
