// Package policy is edgellm's policy runtime: it runs a WebAssembly policy
// (ABI v1, see abi/ABI.md) in wazero at every decode step and turns its
// answer into a decision the engine can apply, whatever the policy does.
//
// # Use
//
//	cfg := policy.NewConfig().WithTrustedKey(pub).WithLimits(limits)
//	rt, err := policy.NewRuntime(ctx, cfg)
//	defer rt.Close(ctx)
//	err = rt.LoadFile(ctx, "policy.tar.gz") // or rt.Watch(ctx, path) for hot reload
//	for each step {
//		d := currentState()              // pre-fill with the engine's state
//		res, err := rt.Decide(ctx, &sensors, &d)
//		apply(d)                         // always valid and clamped
//	}
//
// LoadFile takes a signed bundle (directory or .tar.gz: policy.wasm,
// manifest.json, manifest.sig; see SignBundle) or, with WithInsecure, a
// loose .wasm. Bundles are verified (ed25519 signature over the manifest
// bytes, sha256 of the module, ABI major, min_engine_version, strictly
// increasing revision, size limits) before anything is compiled. With
// Config.WithStateDir the highest accepted revision of each policy name
// survives restarts (RollbackIndex); a manifest's expires, key IDs and a
// revocation list (WithTrustDir) guard the update channel, and
// Runtime.WatchInbox loads bundles an app renames into a directory
// (docs/POLICY-UPDATES.md).
//
// Decide never fails because of the policy: on a trap, a deadline overrun, a
// bad status or an invalid decision it answers with the last good decision
// (or the caller's pre-filled state), reports why in Result, counts it in
// Stats, logs it with log/slog off the hot path, and re-instantiates the
// module on a background goroutine. After K consecutive failures the module
// is quarantined and the previous good module restored. RATIONALE.md
// explains these choices and the clamp rules.
//
// # Concurrency and ownership
//
// Decide must be called from one goroutine at a time (a second concurrent
// call gets ErrConcurrentDecide); it never waits for loads, reloads or
// re-instantiation. LoadFile, Watch, Stats, Revision, Generation, Module and
// Close are safe from any goroutine. Close waits for a Decide in progress,
// stops watchers and background goroutines and releases every module; the
// Runtime owns all wazero objects. Config is an immutable value.
package policy
