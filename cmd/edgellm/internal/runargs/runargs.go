// Package runargs builds the command line of `edgellm run` for a program
// that drives it as a child process (cmd/edgellm/internal/scenario). The flag names are
// those cmd/edgellm's run registers; its TestRunArgs parses every argv this
// package builds with run's own flag set, so the two cannot drift.
package runargs

import (
	"strconv"
	"strings"
	"time"
)

// Run is an `edgellm run` invocation. Zero fields are left out (run's
// defaults apply), except where noted.
type Run struct {
	Model          string   // -m
	Tiers          []string // --tiers
	LayerSets      []string // --layer-sets (with Model)
	Manifest       string   // --manifest
	TokTarget      float32  // --tok-target
	Engine         string   // --engine
	NoMmap         bool     // --no-mmap
	Repack         bool     // --repack
	StatsJSON      string   // --stats-json
	LogitsOut      string   // --logits-out
	Policy         string   // --policy
	PolicyInsecure bool     // --policy-insecure
	N              int      // -n (always written)
	Temp           float32  // --temp (always written: 0 is greedy)
	Threads        int      // --threads
	Ctx            int      // --ctx
	Prompt         string   // -p
	// Sensors, SensorInterval and TraceStepMs: SensorFlags.
	Sensors        string
	SensorInterval time.Duration
	TraceStepMs    int64
}

// Argv is the argument list, starting with the subcommand "run".
func (r Run) Argv() []string {
	a := []string{"run"}
	str := func(flag, v string) {
		if v != "" {
			a = append(a, flag, v)
		}
	}
	num := func(flag string, v int64) {
		if v != 0 {
			a = append(a, flag, strconv.FormatInt(v, 10))
		}
	}
	str("-m", r.Model)
	str("--tiers", strings.Join(r.Tiers, ","))
	str("--layer-sets", strings.Join(r.LayerSets, ","))
	str("--manifest", r.Manifest)
	if r.TokTarget != 0 {
		a = append(a, "--tok-target", strconv.FormatFloat(float64(r.TokTarget), 'g', -1, 32))
	}
	str("--engine", r.Engine)
	if r.NoMmap {
		a = append(a, "--no-mmap")
	}
	if r.Repack {
		a = append(a, "--repack")
	}
	str("--stats-json", r.StatsJSON)
	str("--logits-out", r.LogitsOut)
	str("--policy", r.Policy)
	if r.PolicyInsecure {
		a = append(a, "--policy-insecure")
	}
	a = append(a, "-n", strconv.Itoa(r.N), "--temp", strconv.FormatFloat(float64(r.Temp), 'g', -1, 32))
	num("--threads", int64(r.Threads))
	num("--ctx", int64(r.Ctx))
	str("-p", r.Prompt)
	return append(a, SensorFlags(r.Sensors, r.SensorInterval, r.TraceStepMs)...)
}

// SensorFlags are the flags choosing run's sensor source: --sensors spec,
// --sensor-interval and --trace-step-ms (each left out when zero).
func SensorFlags(spec string, interval time.Duration, traceStepMs int64) []string {
	var a []string
	if spec != "" {
		a = append(a, "--sensors", spec)
	}
	if interval != 0 {
		a = append(a, "--sensor-interval", interval.String())
	}
	if traceStepMs != 0 {
		a = append(a, "--trace-step-ms", strconv.FormatInt(traceStepMs, 10))
	}
	return a
}
