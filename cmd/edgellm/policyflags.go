package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/spf13/pflag"
)

func addPolicyFlags(fs *pflag.FlagSet) {
	fs.String("policy", "", "policy: a .wasm file, a bundle directory or a bundle .tar.gz ('' or 'none' = no policy)")
	fs.String("policy-key", "", "trusted ed25519 public key (PEM) that policy bundles must be signed with, or a trust directory: *.pub keys plus an optional 'revoked' list of key IDs")
	fs.String("policy-state", "", policyStateHelp)
	fs.String("policy-inbox", "", "directory watched for new policy bundles (write elsewhere, then rename in; see docs/POLICY-UPDATES.md)")
	fs.Bool("policy-insecure", false, "accept unsigned policies (loose .wasm files): development only")
	fs.String("sensors", "live", "sensor readings for the policy: live, trace:FILE (a JSONL trace, SIMULATED), or live+trace:FILE (live, with the fields the trace carries replaced by it)")
	fs.Int64("trace-step-ms", 100, "with --sensors trace:FILE, trace milliseconds per decode step")
	fs.Duration("sensor-interval", 100*time.Millisecond, "how often live sensors are re-read (not every token)")
	fs.Duration("policy-deadline", policy.DefaultDeadline, "wall-clock budget of one policy call; a call over it is stopped and counted as a failed call (raise it for slow or emulated CPUs)")
}

type policyOptions struct {
	Policy         string        `koanf:"policy"`
	PolicyKey      string        `koanf:"policy-key"`
	PolicyInsecure bool          `koanf:"policy-insecure"`
	PolicyState    string        `koanf:"policy-state"`
	PolicyInbox    string        `koanf:"policy-inbox"`
	Sensors        string        `koanf:"sensors"`
	TraceStepMs    int64         `koanf:"trace-step-ms"`
	SensorInterval time.Duration `koanf:"sensor-interval"`
	PolicyDeadline time.Duration `koanf:"policy-deadline"`
}

func (o policyOptions) enabled() bool {
	return (o.Policy != "" && o.Policy != "none") || o.PolicyInbox != ""
}

// newSensorSource builds the source named by --sensors.
func newSensorSource(o policyOptions) (host.SensorSource, io.Closer, error) {
	live := func() (*host.LiveSensors, error) {
		if o.SensorInterval <= 0 {
			return nil, usagef("--sensor-interval %v: must be > 0", o.SensorInterval)
		}
		return host.NewLiveSensors(o.SensorInterval, nil)
	}
	switch {
	case o.Sensors == "live":
		l, err := live()
		if err != nil {
			return nil, nil, err
		}
		return l, l, nil
	case strings.HasPrefix(o.Sensors, "trace:"):
		t, err := host.NewTraceSensors(strings.TrimPrefix(o.Sensors, "trace:"), o.TraceStepMs)
		if err != nil {
			return nil, nil, err
		}
		return t, nil, nil
	case strings.HasPrefix(o.Sensors, "live+trace:"):
		t, err := host.NewTraceSensors(strings.TrimPrefix(o.Sensors, "live+trace:"), o.TraceStepMs)
		if err != nil {
			return nil, nil, err
		}
		l, err := live()
		if err != nil {
			return nil, nil, err
		}
		m := &host.MixedSensors{Live: l, Trace: t}
		return m, m, nil
	}
	return nil, nil, usagef("--sensors %q: want live, trace:FILE or live+trace:FILE", o.Sensors)
}

// startPolicy loads the policy for a session and returns its adapter and a
// cleanup function.
func startPolicy(c *cmdEnv, o policyOptions, eng host.Engine, sess host.Session, nCtx, threads int, kv host.KVType) (*host.Adapter, func(), error) {
	if o.PolicyDeadline <= 0 {
		return nil, nil, usagef("--policy-deadline %v: must be > 0", o.PolicyDeadline)
	}
	src, closer, err := newSensorSource(o)
	if err != nil {
		return nil, nil, err
	}
	cfg := policy.NewConfig().WithLimits(host.PolicyLimits(eng, nCtx)).WithInsecure(o.PolicyInsecure).WithDeadline(o.PolicyDeadline)
	if cfg, err = policyUpdateConfig(cfg, o); err != nil {
		return nil, nil, err
	}
	rt, err := policy.NewRuntime(c.Ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {
		if g := rt.Stats().DeadlineGraces; g > 0 {
			c.Logf("policy: %d deadline extension(s): the deadline timer ran over a deadline late, so the process was not running (CPU quota, stopped); those calls were not charged for it", g)
		}
		rt.Close(context.Background())
		if closer != nil {
			closer.Close()
		}
	}
	if o.Policy != "" && o.Policy != "none" {
		if err := rt.LoadFile(c.Ctx, o.Policy); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("--policy %s: %w", o.Policy, err)
		}
	}
	if err := startInbox(c, rt, o); err != nil {
		cleanup()
		return nil, nil, err
	}
	// Compiling a policy that is not in the compilation cache leaves ~18 MB
	// of freed compiler heap (a 1.9 MB Go guest) that Go would hand back to
	// the OS only gradually; under a memory limit that was enough to get the
	// engine OOM-killed (TestScenarioMemory with a cold cache). Return it
	// before generation starts.
	debug.FreeOSMemory()
	c.Logf("policy: %s (%s); sensors: %s", o.Policy, rt.Module(), src.Describe())
	return host.NewAdapter(rt, src, eng, sess, nCtx, threads, kv, c.Stderr), cleanup, nil
}
