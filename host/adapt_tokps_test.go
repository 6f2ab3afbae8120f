package host

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// noSensors is a SensorSource with no device readings.
type noSensors struct{}

func (noSensors) Fill(int, time.Duration, *abi.Sensors) {}
func (noSensors) Describe() string                      { return "none" }
func (noSensors) Close() error                          { return nil }

// TestAdapterTokPerSecPresence: the policy call before any timed step has
// no tok/s reading (not a reading of 0); once a step has been timed both
// tok/s fields are present and non-zero, the raw one included.
func TestAdapterTokPerSecPresence(t *testing.T) {
	eng, err := Load(sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf"), LoadOptions{Engine: "native"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	cfg := SessionConfig{NCtx: 64, Threads: 1, KVType: KVF16}
	sess, err := eng.NewSession(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx := context.Background()
	rt, err := policy.NewRuntime(ctx, policy.NewConfig().WithInsecure(true).WithLimits(policyLimits(eng, cfg.NCtx)))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if err := rt.LoadFile(ctx, buildPolicyWasm(t, "static")); err != nil {
		t.Fatal(err)
	}
	a := newAdapter(rt, noSensors{}, eng, sess, cfg, io.Discard)
	a.wall = false // calls by the step count alone, as with a trace
	const tps = abi.PresentTokPerSec | abi.PresentTokPerSecSmoothed
	if err := a.BeforeStep(0); err != nil {
		t.Fatal(err)
	}
	if a.Stats().Calls != 1 {
		t.Fatalf("%d policy calls at step 0, want 1", a.Stats().Calls)
	}
	if a.s.Present&tps != 0 {
		t.Fatalf("tok/s present before any step was timed (%g, %g)", a.s.TokPerSec, a.s.TokPerSecSmoothed)
	}
	// The next call is due at the cadence; BeforeStep times each step.
	for step := 1; step <= DefaultCadence; step++ {
		time.Sleep(time.Millisecond)
		if err := a.BeforeStep(step); err != nil {
			t.Fatal(err)
		}
	}
	if a.Stats().Calls != 2 {
		t.Fatalf("%d policy calls after %d steps, want 2", a.Stats().Calls, DefaultCadence)
	}
	if a.s.Present&tps != tps || !(a.s.TokPerSec > 0) || !(a.s.TokPerSecSmoothed > 0) {
		t.Fatalf("after timed steps: present %#x, tok/s %g, smoothed %g", a.s.Present&tps, a.s.TokPerSec, a.s.TokPerSecSmoothed)
	}
}
