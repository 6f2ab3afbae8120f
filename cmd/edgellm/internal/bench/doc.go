// Package bench measures an engine the way `edgellm bench` reports it: prompt
// (prefill) and steady-state decode throughput as medians over repeats, model
// load time, peak RSS and PSS, and the latency of a tier swap with KV
// migration broken into its phases.
//
// # Use
//
//	res, err := bench.Run(ctx, path, bench.Options{Engine: "llamacpp", NPrompt: 128, NGen: 128, Repeats: 3, Threads: 1})
//	cmp, err := bench.Compare(ctx, path, "native", "llamacpp", opts) // both in one process, interleaved
//	sw, err := bench.Swap(ctx, bench.SwapOptions{Tiers: []string{q8, q4}, NCtxTokens: 512, Repeats: 3})
//
// Every repeat runs on a fresh Session of the same loaded model: greedy
// sampling, the end-of-generation token does not stop generation, and decode
// throughput excludes the first decode step (host.Generate's Stats). Compare
// loads both engines before the first repeat and alternates them (A, B, A,
// B, ...) so machine noise — this is a shared, often overloaded machine —
// falls on both sides alike; report the ratios, not the absolute speeds.
//
// Memory is the whole process: a MemSampler reads /proc/self/statm (a cheap
// counter) every tick and /proc/self/smaps_rollup (a page-table walk, about
// 30 ns per resident page) as often as keeps that walk under a tenth of one
// core, plus a final reading when it stops.
//
// Nothing here is safe for concurrent use; a MemSampler owns its goroutine.
package bench
