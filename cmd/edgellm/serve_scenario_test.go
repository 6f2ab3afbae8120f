//go:build linux

package main

import (
	"testing"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/scenario"
)

// TestScenarioServeMemory runs the memory scenario under `edgellm serve`
// (testdata/scenarios/serve-memory-hog.yaml): the runner is the server's
// client, sending 24-token requests one after another; the hogs arrive at
// the server's tokens 16 and 64 (token gate). The default policy keeps
// serving every request with 0 OOM kills; static-highest is OOM-killed
// mid-request. Without writable cgroups it runs the SIMULATED fallback and
// skips (only with EDGELLM_ALLOW_NO_CGROUPS=1, as TestScenarioMemory).
func TestScenarioServeMemory(t *testing.T) {
	const file = "../../testdata/scenarios/serve-memory-hog.yaml"
	ok, why := cgroupsWritable(t)
	if !ok {
		rep, _, stderr := runScenarioCLI(t, file)
		assertSimulated(t, rep, stderr)
		def := policyResult(t, rep, "default")
		if def.Serve == nil || def.Serve.Failed != 0 || def.Tokens != rep.N {
			t.Errorf("simulated default under serve: %s, %d/%d tokens, client %+v", def.Outcome, def.Tokens, rep.N, def.Serve)
		}
		t.Skipf("cgroups not writable here (%s): ran the SIMULATED fallback only", why)
	}
	rep, _, _ := runScenarioCLI(t, file)
	if rep.Simulated {
		t.Fatalf("cgroups are writable but the pressure was %s", rep.Pressure)
	}
	st := policyResult(t, rep, "static-highest")
	if !st.OOMKilled || st.Completed || st.OOMKills == 0 || st.Tokens >= rep.N {
		t.Errorf("static-highest: %s (OOM kills %d), %d/%d tokens; want OOM-killed", st.Outcome, st.OOMKills, st.Tokens, rep.N)
	}
	if st.Serve == nil || st.Serve.Failed == 0 {
		t.Errorf("static-highest: the client saw no failed request though the server was killed: %+v", st.Serve)
	}
	def := policyResult(t, rep, "default")
	if !def.Completed || def.OOMKilled || def.OOMKills != 0 || def.Tokens != rep.N {
		t.Errorf("default: %s, %d/%d tokens, OOM kills %d; want completed with none", def.Outcome, def.Tokens, rep.N, def.OOMKills)
	}
	// Every request of the stream was answered, with all its tokens.
	if s := def.Serve; s == nil || s.Failed != 0 || s.Completed != s.Requests || s.Tokens != rep.N || s.Requests < 2 {
		t.Errorf("default: client %+v; want every request answered, %d tokens in all", def.Serve, rep.N)
	}
	if def.TierSwaps == 0 || !hasEvent(def, "memory low") {
		t.Errorf("default made %d tier swaps, none for memory: %+v", def.TierSwaps, def.Events)
	}
	for _, p := range []*scenario.PolicyResult{st, def} {
		if len(p.Hogs) == 0 || p.PeakCgroupMB <= 0 {
			t.Errorf("%s: hogs %d, peak cgroup %.1f MiB", p.Name, len(p.Hogs), p.PeakCgroupMB)
		}
		t.Logf("%s: %s, %d tokens, %d/%d requests answered, mean %.1f tok/s, %d tier swaps, OOM kills %d, peak RSS %.1f MiB, peak cgroup %.1f MiB",
			p.Name, p.Outcome, p.Tokens, p.Serve.Completed, p.Serve.Requests, p.MeanTPS, p.TierSwaps, p.OOMKills, p.PeakRSSMB, p.PeakCgroupMB)
	}
}
