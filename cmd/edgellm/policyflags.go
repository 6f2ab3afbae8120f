package main

import (
	"errors"
	"fmt"
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
	fs.Int64("trace-step-ms", host.DefaultTraceStepMs, "with --sensors trace:FILE, trace milliseconds per decode step")
	fs.Duration("sensor-interval", host.DefaultSensorInterval, "how often live sensors are re-read (not every token)")
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

// startPolicy attaches the policy the flags name to a session created with
// sc and returns its adapter; Close it after generation.
func startPolicy(c *cmdEnv, o policyOptions, eng host.Engine, sess host.Session, sc host.SessionConfig) (*host.Adapter, error) {
	if o.SensorInterval <= 0 {
		return nil, usagef("--sensor-interval %v: must be > 0", o.SensorInterval)
	}
	if o.TraceStepMs <= 0 {
		return nil, usagef("--trace-step-ms %d: must be > 0", o.TraceStepMs)
	}
	if o.PolicyDeadline <= 0 {
		return nil, usagef("--policy-deadline %v: must be > 0", o.PolicyDeadline)
	}
	cfg := policy.NewConfig().WithInsecure(o.PolicyInsecure).WithDeadline(o.PolicyDeadline)
	cfg, err := policyUpdateConfig(cfg, o)
	if err != nil {
		return nil, err
	}
	path := o.Policy
	if path == "none" {
		path = ""
	}
	a, err := host.AttachPolicy(c.Ctx, sess, host.PolicyOptions{
		Path: path, Inbox: o.PolicyInbox, Config: &cfg, Log: c.Stderr,
		Sensors: o.Sensors, SensorOptions: host.SensorOptions{Interval: o.SensorInterval, TraceStepMs: o.TraceStepMs},
	})
	if errors.Is(err, host.ErrSensorSpec) {
		return nil, usagef("--sensors: %v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	c.Logf("policy: %s (%s)", o.Policy, a.Describe())
	if o.PolicyInbox != "" {
		c.Logf("policy: watching inbox %s (revision in service: %d)", o.PolicyInbox, a.Revision())
	}
	return a, nil
}

// stopPolicy closes the adapter and says what the deadline machinery did.
func stopPolicy(c *cmdEnv, a *host.Adapter) {
	if g := a.Stats().DeadlineGraces; g > 0 {
		c.Logf("policy: %d deadline extension(s): the deadline timer ran over a deadline late, so the process was not running (CPU quota, stopped); those calls were not charged for it", g)
	}
	a.Close()
}
