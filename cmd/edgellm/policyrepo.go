package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/host/policy/update"
)

// `edgellm policy repo VERB REPO`: the operator side of the TUF update
// channel (docs/POLICY-UPDATES.md).

func init() {
	register(&command{
		Name:    "policy repo",
		Summary: "manage a TUF policy repository: init, add, publish, rotate-key, revoke, status",
		Usage: `VERB REPO [args]
  init REPO [--root-keys N --root-threshold T --targets-keys N --targets-threshold T]
  add REPO --name N [--revision R] [--min-engine V] MODULE.wasm
  add REPO --bundle OLD.tar.gz --pub KEY.pub|TRUSTDIR     (convert a signed bundle)
  publish REPO             (also: run it more often than --timestamp-expires)
  rotate-key REPO --role root|targets|snapshot|timestamp [--key KEYID]
  revoke REPO KEYID       (rotate-key and revoke also publish staged changes)
  status REPO
Devices fetch REPO/published (serve it over HTTP(S), or copy it: --policy-repo URL|DIR) and ship REPO/published/root.json.`,
		Flags: func(fs *pflag.FlagSet) {
			fs.Int("root-keys", 1, "init: number of root keys")
			fs.Int("root-threshold", 1, "init: root signatures required")
			fs.Int("targets-keys", 1, "init: number of targets keys")
			fs.Int("targets-threshold", 1, "init: targets signatures required")
			fs.String("name", "", "add: policy name (the devices' --policy-name)")
			fs.Int64("revision", 0, "add: revision (0 = the current one + 1)")
			fs.String("min-engine", "0.0.0", "add: lowest edgellm version that may load the module (semver)")
			fs.String("bundle", "", "add: a signed bundle (directory or .tar.gz) to convert instead of a module")
			fs.String("pub", "", "add --bundle: the key or trust directory the bundle must verify against")
			fs.String("role", "", "rotate-key: the role whose keys are replaced")
			fs.String("key", "", "rotate-key: replace only this key ID (default: every key of the role)")
			fs.String("root-expires", "365d", "expiry of a root signed now (1h..3660d)")
			fs.String("targets-expires", "90d", "expiry of targets signed now (1m..732d)")
			fs.String("snapshot-expires", "7d", "expiry of a snapshot signed now (1m..366d)")
			fs.String("timestamp-expires", "1d", "expiry of a timestamp signed now (1m..31d): devices stop accepting updates this long after the last publish")
		},
		Run: runPolicyRepo,
	})
}

type policyRepoOptions struct {
	RootKeys         int    `koanf:"root-keys"`
	RootThreshold    int    `koanf:"root-threshold"`
	TargetsKeys      int    `koanf:"targets-keys"`
	TargetsThreshold int    `koanf:"targets-threshold"`
	Name             string `koanf:"name"`
	Revision         int64  `koanf:"revision"`
	MinEngine        string `koanf:"min-engine"`
	Bundle           string `koanf:"bundle"`
	Pub              string `koanf:"pub"`
	Role             string `koanf:"role"`
	Key              string `koanf:"key"`
	RootExpires      string `koanf:"root-expires"`
	TargetsExpires   string `koanf:"targets-expires"`
	SnapshotExpires  string `koanf:"snapshot-expires"`
	TimestampExpires string `koanf:"timestamp-expires"`
}

func (o policyRepoOptions) expiries() (update.Expiries, error) {
	var e update.Expiries
	for _, x := range []struct {
		flag, v string
		d       *time.Duration
	}{{"--root-expires", o.RootExpires, &e.Root}, {"--targets-expires", o.TargetsExpires, &e.Targets},
		{"--snapshot-expires", o.SnapshotExpires, &e.Snapshot}, {"--timestamp-expires", o.TimestampExpires, &e.Timestamp}} {
		d, err := update.ParseExpiry(x.v)
		if err != nil {
			return e, usagef("%s: %v", x.flag, err)
		}
		*x.d = d
	}
	if err := e.Check(); err != nil {
		return e, usagef("%v", err)
	}
	return e, nil
}

func repoKeyring(dir string) update.Keyring {
	return update.FileKeyring{Dir: filepath.Join(dir, "keys")}
}

func runPolicyRepo(c *cmdEnv, args []string) error {
	var o policyRepoOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) < 2 {
		return usagef("policy repo VERB REPO: want a verb (init, add, publish, rotate-key, revoke, status) and the repository directory")
	}
	verb, dir, rest := args[0], args[1], args[2:]
	e, err := o.expiries()
	if err != nil {
		return err
	}
	if verb == "init" {
		if len(rest) != 0 {
			return usagef("policy repo init REPO takes no other arguments")
		}
		r, err := update.InitRepo(dir, repoKeyring(dir), update.InitOptions{RootKeys: o.RootKeys, RootThreshold: o.RootThreshold,
			TargetsKeys: o.TargetsKeys, TargetsThreshold: o.TargetsThreshold, Expiries: e}, nil)
		if err != nil {
			return err
		}
		c.Logf("repository %s created; keys in %s (keep them off the web server)", dir, filepath.Join(dir, "keys"))
		c.Logf("serve or copy %s; ship %s with the app (--policy-root)", r.PublishedDir(), r.RootPath())
		return nil
	}
	r, err := update.OpenRepo(dir, repoKeyring(dir), nil)
	if err != nil {
		return err
	}
	switch verb {
	case "add":
		return runPolicyRepoAdd(c, r, o, rest)
	case "publish":
		if len(rest) != 0 {
			return usagef("policy repo publish REPO takes no other arguments")
		}
		if err := r.Publish(e); err != nil {
			return err
		}
		c.Logf("published %s", r.PublishedDir())
	case "rotate-key":
		if len(rest) != 0 || o.Role == "" {
			return usagef("policy repo rotate-key REPO --role ROLE [--key KEYID]")
		}
		ids, err := r.RotateKey(o.Role, o.Key, e)
		if err != nil {
			return err
		}
		c.Logf("%s key(s) now %s; root version %d published (devices take it at their next check)", o.Role, ids, r.Root().Signed.Version)
	case "revoke":
		if len(rest) != 1 {
			return usagef("policy repo revoke REPO KEYID")
		}
		if err := r.Revoke(rest[0], e); err != nil {
			return err
		}
		c.Logf("key %s revoked; root version %d published (devices take it at their next check)", rest[0], r.Root().Signed.Version)
	case "status":
		if len(rest) != 0 {
			return usagef("policy repo status REPO takes no other arguments")
		}
		fmt.Fprint(c.Stdout, r.Status())
	default:
		return usagef("policy repo %s: unknown verb (init, add, publish, rotate-key, revoke, status)", verb)
	}
	return nil
}

// runPolicyRepoAdd validates a module with the host's loader and stages
// it; --bundle converts a signed bundle of the previous update channel
// (verified against --pub first) keeping its name and revision.
func runPolicyRepoAdd(c *cmdEnv, r *update.Repo, o policyRepoOptions, rest []string) error {
	var wasm []byte
	switch {
	case o.Bundle != "" && len(rest) == 0:
		if o.Pub == "" {
			return usagef("policy repo add --bundle needs --pub KEY.pub|TRUSTDIR (the bundle is verified before it is converted)")
		}
		td, err := policy.ReadTrust(o.Pub)
		if err != nil {
			return fmt.Errorf("--pub: %w", err)
		}
		b, err := policy.VerifyBundle(o.Bundle, policy.VerifyOptions{Keys: td.Keys, Revoked: td.Revoked, Limits: policy.NewConfig().BundleLimits()})
		if err != nil {
			return err
		}
		wasm = b.Wasm
		if o.Name == "" {
			o.Name = b.Manifest.Name
		}
		if o.Revision == 0 {
			o.Revision = b.Manifest.Revision
		}
		if o.MinEngine == "0.0.0" && b.Manifest.MinEngineVersion != "" {
			o.MinEngine = b.Manifest.MinEngineVersion
		}
	case o.Bundle == "" && len(rest) == 1:
		if o.Name == "" {
			return usagef("policy repo add REPO --name N MODULE.wasm")
		}
		var err error
		if wasm, err = update.ReadRegularFile(rest[0], policy.DefaultMaxBundleBytes); err != nil {
			return err
		}
	default:
		return usagef("policy repo add REPO --name N MODULE.wasm, or add REPO --bundle B --pub KEY")
	}
	cfg := policy.NewConfig().WithCacheDir("-")
	cu, err := update.AddModule(c.Ctx, r, cfg, wasm, update.AddOptions{Name: o.Name, Revision: o.Revision, MinEngineVersion: o.MinEngine})
	if err != nil {
		return err
	}
	c.Logf("staged %s revision %d (module ABI %s, sha256 %s); run `edgellm policy repo publish %s`", cu.Name, cu.Revision, cu.ABI, cu.SHA256[:16], r.Dir)
	return nil
}

// readRoot reads a trusted root.json (--policy-root).
func readRoot(path string) ([]byte, error) {
	b, err := update.ReadRegularFile(path, update.DefaultLimits().Root)
	if err != nil {
		return nil, fmt.Errorf("--policy-root: %w", err)
	}
	if !strings.Contains(string(b), `"_type"`) {
		return nil, fmt.Errorf("--policy-root %s: not a TUF root.json", path)
	}
	return b, nil
}
