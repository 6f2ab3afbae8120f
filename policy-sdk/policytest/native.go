package policytest

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	sdk "github.com/edgellm/edgellm/policy-sdk"
)

// Option configures RunNative.
type Option func(*options)

type options struct{ reset func() }

// WithReset sets a function that clears the policy's package state; RunNative
// calls it before each case, as a fresh wasm instance starts fresh.
func WithReset(f func()) Option { return func(o *options) { o.reset = f } }

// RunNative runs the cases against decide compiled natively, through
// sdk.Call: the same decode → Decide → encode path the guest runs.
func RunNative(t *testing.T, decide sdk.DecideFunc, cases []Case, opts ...Option) {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	in, out := make([]byte, abi.SensorsSize), make([]byte, abi.DecisionSize)
	var x sdk.Exchange
	run(t, cases, func(t *testing.T, c *Case) decider {
		if o.reset != nil {
			o.reset()
		}
		return func(t *testing.T, s *abi.Sensors, d *abi.Decision) {
			if err := abi.EncodeSensors(in, s); err != nil {
				t.Fatal(err)
			}
			if err := abi.EncodeDecision(out, d); err != nil {
				t.Fatal(err)
			}
			if st := sdk.Call(decide, &x, in, out); st != abi.StatusOK {
				var dd abi.Decision
				_ = abi.DecodeDecision(out, &dd)
				t.Fatalf("step %d: status %v (%s)", s.Step, st, dd.Reason())
			}
			if err := abi.DecodeDecision(out, d); err != nil {
				t.Fatal(err)
			}
		}
	})
}
