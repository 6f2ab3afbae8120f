// Package update is edgellm's policy update channel on The Update
// Framework, through go-tuf v2: an operator's repository (Repo: InitRepo,
// Add/AddModule, Publish, RotateKey, Revoke, Status) and a device's client
// (Client: Open, LastGood, Check, Commit), with Start/Apply to keep a
// policy.Runtime on the newest module.
//
// A policy module is a TUF target NAME.wasm whose custom metadata
// ("edgellm": name, revision, abi, abi_min, abi_max, module_sha256,
// min_engine_version) the device checks against itself; go-tuf checks the
// signatures, thresholds, versions, expiries, lengths and hashes. The
// device fetches over HTTP(S) or from a directory through one bounded
// fetcher (regular files only, non-blocking opens, per-file limits, a
// per-check deadline; Limits documents the memory bound), keeps go-tuf's
// trusted metadata and the last-good module in a locked state directory,
// and boots from the last-good module without network, accepting an equal
// revision.
//
// Use (device):
//
//	c, err := update.Open(update.Options{Repo: url, TrustedRoot: rootJSON, StateDir: dir, Name: "fleet"})
//	defer c.Close() // after the runtime is closed
//	err = update.Start(ctx, rt, c, 5*time.Minute)
//
// docs/POLICY-UPDATES.md is the operator's guide and the threat table.
//
// Concurrency: Client methods are safe from any goroutine and run one
// check at a time; a Repo is used by one goroutine.
package update
