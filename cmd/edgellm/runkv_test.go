package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// kvMoveRE matches the adapter's line for an applied KV type change.
var kvMoveRE = regexp.MustCompile(`\[policy step (\d+): [^\]]*KV (\w+)→(\w+) \(requantized`)

// TestRunKVPolicy: the default policy asks the native engine for a smaller
// KV type under (SIMULATED, replayed) cgroup pressure and back up after it,
// never above the session's start type, and the session applies it.
// testdata/traces/kv_pressure.jsonl: 95% of the cgroup limit at records
// 0–39, 49% from 40; --trace-step-ms 50 makes record i the reading of step
// i, and a trace replay calls the policy at every cadence step, so the
// moves are tied to token positions: downs while the trace is low (step <
// 40), ups only after policies/default's KVCalmSteps (32) ample steps (step
// ≥ 72), and at least its KVHoldSteps (16) between two moves.
func TestRunKVPolicy(t *testing.T) {
	model := sharedtest.Stories260K(t)
	wasm := buildPolicy(t, "default")
	for _, tc := range []struct {
		start string
		want  []string // "from→to" in order
	}{
		{"f16", []string{"f16→q8_0", "q8_0→q4_0", "q4_0→q8_0", "q8_0→f16"}},
		{"q8_0", []string{"q8_0→q4_0", "q4_0→q8_0"}},
	} {
		t.Run(tc.start, func(t *testing.T) {
			_, errs, code := runCLI(t, "run", "-m", model, "--engine", "native", "--kv-type", tc.start,
				"--policy", wasm, "--policy-insecure",
				"--sensors", "trace:../../testdata/traces/kv_pressure.jsonl", "--trace-step-ms", "50",
				"-n", "160", "--temp", "0", "--threads", "1")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !strings.Contains(errs, "SIMULATED") {
				t.Fatalf("trace sensors not labelled simulated: %s", errs)
			}
			var got []string
			last := -1
			for _, line := range strings.Split(errs, "\n") {
				if strings.Contains(line, "KV ") && strings.HasPrefix(line, "[policy step ") {
					t.Log(line)
				}
			}
			for _, m := range kvMoveRE.FindAllStringSubmatch(errs, -1) {
				step, _ := strconv.Atoi(m[1])
				move := m[2] + "→" + m[3]
				got = append(got, move)
				up := kvSize(m[3]) > kvSize(m[2])
				switch {
				case !up && step >= 40:
					t.Errorf("step %d: %s after the pressure ended (step 40)", step, move)
				case up && step < 72:
					t.Errorf("step %d: %s before 32 ample steps (step 72)", step, move)
				case kvSize(m[3]) > kvSize(tc.start):
					t.Errorf("step %d: %s above the start type %s", step, move, tc.start)
				}
				if last >= 0 && step-last < 16 {
					t.Errorf("KV moves at steps %d and %d: closer than 16", last, step)
				}
				last = step
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("KV moves %v, want %v\n%s", got, tc.want, errs)
			}
		})
	}
}

// kvSize orders the KV type names by bytes per value.
func kvSize(name string) int {
	return map[string]int{"q4_0": 1, "q8_0": 2, "f16": 3, "f32": 4}[name]
}
