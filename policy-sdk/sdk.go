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
// to exercise the guest's code path. On wasip1 Call decodes and encodes with
// the bulk-copy wire codec (wire.go), natively with the abi codec; the two
// give identical results (wire_test.go).
func Call(f DecideFunc, x *Exchange, in, out []byte) abi.Status {
	return call(f, x, in, out, wireCodec)
}

// call is Call with the codec chosen by wire (a constant in the guest).
func call(f DecideFunc, x *Exchange, in, out []byte, wire bool) (st abi.Status) {
	var errS, errD error
	if wire {
		errS, errD = wireDecodeSensors(in, &x.Sensors), wireDecodeDecision(out, &x.Decision)
	} else {
		errS, errD = abi.DecodeSensors(in, &x.Sensors), abi.DecodeDecision(out, &x.Decision)
	}
	if errS != nil {
		return abi.StatusBadSensors
	}
	if errD != nil {
		return abi.StatusBadDecision
	}
	defer func() {
		if r := recover(); r != nil {
			st = panicked(r, &x.Decision, out, wire)
		}
	}()
	if f == nil {
		panic("edgellm policy-sdk: no policy registered (call sdk.Register in init)")
	}
	f(&x.Sensors, &x.Decision)
	encodeDecision(out, &x.Decision, wire)
	return abi.StatusOK
}

// panicked writes the panic r as the Decision's reason into out and returns
// StatusPanic (kept out of call's deferred function so that the normal
// return path stays short).
func panicked(r any, d *abi.Decision, out []byte, wire bool) abi.Status {
	d.SetReason(abi.ReasonGuestPanic, panicText(r))
	encodeDecision(out, d, wire)
	return abi.StatusPanic
}

// encodeDecision encodes d into out, which was long enough to decode a
// Decision and so is long enough to encode one (the error is impossible).
func encodeDecision(out []byte, d *abi.Decision, wire bool) {
	if wire {
		_ = wireEncodeDecision(out, d)
	} else {
		_ = abi.EncodeDecision(out, d)
	}
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
