package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/host/policy/update"
	"github.com/spf13/pflag"
)

func addPolicyFlags(fs *pflag.FlagSet) {
	fs.String("policy", "", "policy: a .wasm file, a bundle directory or a bundle .tar.gz ('' or 'none' = no policy)")
	fs.String("policy-key", "", "trusted ed25519 public key (PEM) that policy bundles must be signed with, or a trust directory: *.pub keys plus an optional 'revoked' list of key IDs")
	fs.String("policy-state", "", policyStateHelp)
	fs.String("policy-inbox", "", "directory watched for new policy bundles (write elsewhere, then rename in; see docs/POLICY-UPDATES.md)")
	fs.String("policy-repo", "", "TUF policy repository: an http(s) URL or a directory delivered offline (replaces --policy and --policy-inbox; needs --policy-root and --policy-name; docs/POLICY-UPDATES.md)")
	fs.String("policy-root", "", "with --policy-repo: the trusted root.json shipped with the app")
	fs.String("policy-name", "", "with --policy-repo: the policy this device runs (the only name it accepts)")
	fs.Duration("policy-poll", 5*time.Minute, "with --policy-repo: time between update checks (0 = only at start)")
	fs.Bool("policy-insecure", false, "accept unsigned policies (loose .wasm files): development only")
	fs.String("sensors", "live", "sensor readings for the policy: live, trace:FILE (a JSONL trace, SIMULATED), or live+trace:FILE (live, with the fields the trace carries replaced by it)")
	fs.Int64("trace-step-ms", host.DefaultTraceStepMs, "with --sensors trace:FILE, trace milliseconds per decode step")
	fs.Duration("sensor-interval", host.DefaultSensorInterval, "how often live sensors are re-read (not every token)")
	fs.String("decision-log", "", "write the policy's decision log (JSONL: every change and failed call with its sensor readings) to this file; read it with `edgellm policy log FILE`")
	fs.Duration("policy-deadline", policy.DefaultDeadline, "wall-clock budget of one policy call; a call over it is stopped and counted as a failed call (raise it for slow or emulated CPUs)")
}

type policyOptions struct {
	Policy         string        `koanf:"policy"`
	PolicyKey      string        `koanf:"policy-key"`
	PolicyInsecure bool          `koanf:"policy-insecure"`
	PolicyState    string        `koanf:"policy-state"`
	PolicyInbox    string        `koanf:"policy-inbox"`
	PolicyRepo     string        `koanf:"policy-repo"`
	PolicyRoot     string        `koanf:"policy-root"`
	PolicyName     string        `koanf:"policy-name"`
	PolicyPoll     time.Duration `koanf:"policy-poll"`
	Sensors        string        `koanf:"sensors"`
	TraceStepMs    int64         `koanf:"trace-step-ms"`
	SensorInterval time.Duration `koanf:"sensor-interval"`
	PolicyDeadline time.Duration `koanf:"policy-deadline"`
	DecisionLog    string        `koanf:"decision-log"`
}

func (o policyOptions) enabled() bool {
	return (o.Policy != "" && o.Policy != "none") || o.PolicyInbox != "" || o.PolicyRepo != ""
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
	repo, err := deviceRepoOptions(o)
	if err != nil {
		return nil, err
	}
	a, err := host.AttachPolicy(c.Ctx, sess, host.PolicyOptions{
		Path: path, Inbox: o.PolicyInbox, Repo: repo, RepoPoll: o.PolicyPoll, Config: &cfg, Log: c.Stderr, DecisionLog: o.DecisionLog, MaxThreads: explicitThreads(c, sc),
		Sensors: o.Sensors, SensorOptions: host.SensorOptions{Interval: o.SensorInterval, TraceStepMs: o.TraceStepMs},
	})
	if errors.Is(err, host.ErrSensorSpec) {
		return nil, usagef("--sensors: %v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	if repo != nil {
		c.Logf("policy: %s from %s, revision %d in service (%s; state %s)", o.PolicyName, o.PolicyRepo, a.Revision(), a.Describe(), repo.StateDir)
		return a, nil
	}
	c.Logf("policy: %s (%s)", o.Policy, a.Describe())
	if o.PolicyInbox != "" {
		c.Logf("policy: watching inbox %s (revision in service: %d)", o.PolicyInbox, a.Revision())
	}
	return a, nil
}

// deviceRepoOptions turns --policy-repo and its flags into the update
// client's options (nil without --policy-repo). The state directory is
// --policy-state's, one subdirectory per policy name; one process at a
// time may use it.
func deviceRepoOptions(o policyOptions) (*update.Options, error) {
	if o.PolicyRepo == "" {
		if o.PolicyRoot != "" || o.PolicyName != "" {
			return nil, usagef("--policy-root and --policy-name go with --policy-repo")
		}
		return nil, nil
	}
	if (o.Policy != "" && o.Policy != "none") || o.PolicyInbox != "" {
		return nil, usagef("--policy-repo replaces --policy and --policy-inbox: give one")
	}
	if o.PolicyRoot == "" || o.PolicyName == "" {
		return nil, usagef("--policy-repo needs --policy-root ROOT.json (shipped with the app) and --policy-name NAME")
	}
	if o.PolicyPoll < 0 {
		return nil, usagef("--policy-poll %v: must be >= 0", o.PolicyPoll)
	}
	if err := update.ValidName(o.PolicyName); err != nil {
		return nil, usagef("--policy-name: %v", err)
	}
	root, err := readRoot(o.PolicyRoot)
	if err != nil {
		return nil, err
	}
	dir, err := resolvePolicyStateDir(o.PolicyState)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, usagef("--policy-repo needs a state directory (--policy-state DIR, not '-'): the last-good module and the trusted metadata live there")
	}
	return &update.Options{Repo: o.PolicyRepo, TrustedRoot: root, StateDir: filepath.Join(dir, "repo-"+o.PolicyName), Name: o.PolicyName}, nil
}

// stopPolicy closes the adapter and says what the deadline machinery did.
func stopPolicy(c *cmdEnv, a *host.Adapter) {
	if g := a.Stats().DeadlineGraces; g > 0 {
		c.Logf("policy: %d deadline extension(s): the deadline timer ran over a deadline late, so the process was not running (CPU quota, stopped); those calls were not charged for it", g)
	}
	a.Close()
}

// explicitThreads is the thread count the user set (--threads, or its
// environment or config key), a cap the policy may not raise past; 0 when
// the count was left to the default.
func explicitThreads(c *cmdEnv, sc host.SessionConfig) int {
	if c.userSet("threads") {
		return sc.Threads
	}
	return 0
}
