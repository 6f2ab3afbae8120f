package host

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/host/policy/update"
)

// PolicyOptions configures AttachPolicy.
type PolicyOptions struct {
	// Path is the policy: a signed bundle (a directory or a .tar.gz) or,
	// with Config.WithInsecure(true), a loose .wasm file. It may be empty
	// when Inbox is set.
	Path string
	// Inbox, when set, is a directory watched for policy updates
	// (policy.Runtime.WatchInbox): a complete bundle renamed into it is
	// verified and swapped in between decode steps; partial, corrupt or
	// older ones are logged and left in place.
	Inbox string
	// Repo, when set, is the TUF update channel (host/policy/update;
	// docs/POLICY-UPDATES.md): the last-good module goes in service at
	// once, without network, one update check runs before AttachPolicy
	// returns, then one every RepoPoll (0: none). Path and Inbox must be
	// empty. The client's state directory stays locked until Close.
	Repo     *update.Options
	RepoPoll time.Duration
	// Config configures the policy runtime (trusted key, deadline,
	// compilation cache); nil means policy.NewConfig(). Its Limits are
	// replaced by what the engine and the session can apply.
	Config *policy.Config
	// Sensors names the readings the policy gets (NewSensorSource: "live",
	// "trace:FILE", "live+trace:FILE"; "" is live), configured by
	// SensorOptions. The adapter closes the source it built.
	Sensors       string
	SensorOptions SensorOptions
	// Source, when set, is used instead of Sensors; the caller keeps it and
	// closes it after the adapter.
	Source SensorSource
	// Log receives one line per decision change and per failed policy call;
	// nil discards them.
	Log io.Writer
	// DecisionLog, when set, is the path of the JSONL decision log: every
	// decision change and failed call with the sensor readings behind it,
	// which `edgellm policy log FILE` reads (policy.DecisionLogConfig; the
	// other settings are Config's, a 16 MiB cap by default).
	DecisionLog string
	// MaxThreads caps the threads the policy may choose (0: one per CPU).
	// An app that fixed a thread count for its own reasons (the CLI's
	// explicit --threads) sets it so the policy can lower it but never
	// raise it past.
	MaxThreads int
}

// AttachPolicy loads a policy for sess and returns the Adapter that runs it
// in the decode loop: set GenerateOptions.BeforeStep to its BeforeStep, and
// Close it after generation. The session's engine and resolved
// configuration (context length, thread count, KV type) are the policy's
// starting state and limits. It builds the sensor source, a policy runtime
// limited to what the engine and sess can apply, loads and verifies the
// policy, and returns the compiler's freed heap to the OS before decoding
// starts.
func AttachPolicy(ctx context.Context, sess Session, o PolicyOptions) (*Adapter, error) {
	if sess == nil {
		return nil, fmt.Errorf("AttachPolicy: nil Session")
	}
	eng, sc := sess.Engine(), sess.Config()
	src, owned := o.Source, false
	if src == nil {
		var err error
		if src, err = NewSensorSource(o.Sensors, o.SensorOptions); err != nil {
			return nil, err
		}
		owned = true
	}
	cfg := policy.NewConfig()
	if o.Config != nil {
		cfg = *o.Config
	}
	if o.DecisionLog != "" {
		dl := cfg.DecisionLog()
		dl.Path = o.DecisionLog
		cfg = cfg.WithDecisionLog(dl)
	}
	limits := policyLimits(eng, sc.NCtx)
	if o.MaxThreads > 0 {
		limits.MaxThreads = min(limits.MaxThreads, o.MaxThreads)
	}
	rt, err := policy.NewRuntime(ctx, cfg.WithLimits(limits))
	if err != nil {
		if owned {
			src.Close()
		}
		return nil, err
	}
	a := newAdapter(rt, src, eng, sess, sc, o.Log)
	a.owned = owned
	if o.Repo != nil {
		if o.Path != "" || o.Inbox != "" {
			a.Close()
			return nil, fmt.Errorf("policy: a repository replaces a path and an inbox: give one")
		}
		if err := startRepo(ctx, rt, *o.Repo, o.RepoPoll); err != nil {
			a.Close()
			return nil, err
		}
	} else if o.Path == "" && o.Inbox == "" {
		a.Close()
		return nil, fmt.Errorf("policy: neither a path nor an inbox")
	}
	if o.Path != "" {
		if err := rt.LoadFile(ctx, o.Path); err != nil {
			a.Close()
			return nil, fmt.Errorf("policy %s: %w", o.Path, err)
		}
	}
	if o.Inbox != "" {
		// The watch ends with the runtime (Adapter.Close).
		if _, err := rt.WatchInbox(context.Background(), o.Inbox); err != nil {
			a.Close()
			return nil, fmt.Errorf("policy inbox %s: %w", o.Inbox, err)
		}
	}
	// Compiling a policy that is not in the compilation cache leaves ~18 MB
	// of freed compiler heap (a 1.9 MB Go guest) that Go would hand back to
	// the OS only gradually; under a memory limit that was enough to get the
	// engine OOM-killed (TestScenarioMemory with a cold cache). Return it
	// before generation starts.
	debug.FreeOSMemory()
	return a, nil
}

// startRepo opens the update client and starts the channel; the runtime's
// Close closes the client (releasing the state directory).
func startRepo(ctx context.Context, rt *policy.Runtime, o update.Options, poll time.Duration) error {
	c, err := update.Open(o)
	if err != nil {
		return fmt.Errorf("policy repo: %w", err)
	}
	if err := rt.Go(func(done <-chan struct{}) { <-done; c.Close() }); err != nil {
		c.Close()
		return err
	}
	return update.Start(ctx, rt, c, poll)
}

// Describe is one line on the policy module and where its readings come
// from.
func (a *Adapter) Describe() string {
	return fmt.Sprintf("%s; sensors: %s", a.rt.Module(), a.src.Describe())
}

// Close releases the policy runtime and the sensor source AttachPolicy
// built. The Adapter must not be used afterwards.
func (a *Adapter) Close() error {
	var err error
	if a.rt != nil {
		err = a.rt.Close(context.Background()) // idempotent; Stats still reads it
	}
	if a.owned && a.src != nil {
		if cerr := a.src.Close(); err == nil {
			err = cerr
		}
		a.src = nil
	}
	return err
}
