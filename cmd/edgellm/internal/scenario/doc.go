// Package scenario runs the real engine under real memory and CPU pressure
// and compares policies side by side: `edgellm scenario run FILE.yaml`.
//
// A scenario file (see Spec; testdata/scenarios has examples) names a tier
// ladder (GGUF files, or a SYNTHETIC model made at several types with one
// seed), a prompt, the policies to compare and the pressure: a cgroup
// memory limit with background apps (memory hogs) that start at a time or
// token, a CPU-quota schedule emulating thermal throttling with the
// matching thermal status in the trace the policy reads, or both; or CPU
// contention (cpu.go): real CPU hogs, busy threads pinned to the engine's
// CPUs, started and stopped at token positions, with the policy on live
// CPU-load sensors and per-phase tok/s, threads and CPU per token in the
// report. Run executes each
// policy as a child process `edgellm run …` inside a fresh cgroup (so an
// OOM kill hits the child, never the runner), samples its RSS/PSS and the
// cgroup's usage, follows its per-token statistics (--stats-json) and
// applies the schedule. After each run it measures the run's KL divergence
// against the highest tier on the run's own tokens (quality.go).
// WriteReport writes report.json, SVG charts and an HTML page with the
// policies side by side.
// A contender with a per_layer: section runs on tier 0 with the lower
// tiers mapped as per-layer weight sets and a precision manifest (given,
// or calibrated by the runner with `edgellm calibrate`); its bits per
// weight come from the engine's per-layer set records (spec_perlayer.go).
// A scenario with a serve: section runs each policy as `edgellm serve`
// instead, the runner being its client (spec_serve.go, serve_linux.go).
//
// Where cgroups cannot be written the pressure is SIMULATED: the policy
// reads a trace instead, no limit or quota is applied, and the report,
// HTML and log lines say so. See RATIONALE.md for the design choices.
//
// Run is not safe for concurrent use with the same output directory. Every
// cgroup and process it creates is removed before it returns, also when its
// context is cancelled (Ctrl-C); a runner killed with SIGKILL leaves a
// cgroup that the next run sweeps (cmd/edgellm/internal/pressure), and its children die
// with it (PR_SET_PDEATHSIG).
package scenario
