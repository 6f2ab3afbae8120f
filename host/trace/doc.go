// Package trace reads, writes, replays and generates sensor traces: JSONL
// files with one record per instant, each carrying t_ms and any subset of
// the device readings and engine telemetry of abi.Sensors, under the ABI's
// JSON names.
//
//	{"t_ms":0,"mem_available_mb":3000,"mem_threshold_mb":512,"low_memory":false}
//	{"t_ms":100,"thermal_status":3,"temp_c":47.5}
//
// # Use
//
// Read / ReadFile parse a trace (malformed lines name their line number and
// field; ReadOptions.OnError chooses Stop or Skip). A Record remembers which
// fields its line carried (Record.Present) and Record.Apply overlays only
// those. A Replayer applies records in order on an accumulated state, so a
// field keeps its value until a later record changes it — the way a policy
// sees a device. Writer writes records back; `edgellm trace record` captures
// live readings with it. Generate makes the named synthetic scenarios of
// `edgellm trace gen` (simulated, deterministic for a seed).
//
// # Goroutines and ownership
//
// Records are plain values. A Replayer or a Writer belongs to one goroutine.
// Record.Apply, Replayer.At and Replayer.Fill do not allocate.
package trace
