// Package policytest runs one table of policy test cases natively and
// against the built .wasm, in the spirit of `opa test`.
//
//	cases := []policytest.Case{{
//		Name:  "thermal ramp",
//		Trace: "../../testdata/traces/thermal_ramp.jsonl",
//		Base:  engine,          // tiers, layers, latencies
//		Start: startDecision,   // the engine's state before the first call
//		Check: func(t *testing.T, step int, s *abi.Sensors, d *abi.Decision) { ... },
//	}}
//	func TestNative(t *testing.T) { policytest.RunNative(t, Decide, cases, policytest.WithReset(reset)) }
//	func TestWasm(t *testing.T)   { policytest.RunWasm(t, policytest.Build(t, "."), cases) }
//
// Each case is a sequence of calls. The sensors of a call come from a JSONL
// trace (host/trace format; one call per record, fields carried forward) or
// from Steps. Between calls a simulated engine applies every decision by the
// host's own rule, policy.Apply, with every ability (0 in Threads, LayerBits
// and KVType means "leave as is", a 0 scale in LayerWindowScale the full
// window; a host whose engine lacks an ability keeps that field, e.g. the KV
// type) and
// reports it back: the Cur* fields of the next Sensors and the next pre-filled
// Decision always come from it. This is a simulation, not the real engine.
//
// RunNative calls the Go function through sdk.Call, the guest's own
// decode/encode path. RunWasm goes through the real host runtime
// (host/policy: wazero, deadline, validation, clamping) with a fresh Runtime
// and instance per case, so package state never leaks between cases; it fails
// a step whose outcome is not OK and, unless Case.AllowClamps, a step whose
// decision had to be clamped. Both fail when no case ran.
//
// Under `edgellm policy test DIR`, EDGELLM_POLICY_WASM names the module the
// command built from DIR, and Build(t, ".") returns it instead of building
// (see Build), so the table runs against exactly that .wasm.
//
// Cases are run sequentially; the Check functions may keep no state between
// runs (use After for assertions over the whole run).
package policytest
