package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/host/policy/update"
)

// Policy bundle commands: keygen, sign, verify, log. Keys are PEM files:
// KEY.pub ("PUBLIC KEY", PKIX) and KEY.key ("PRIVATE KEY", PKCS #8, mode 0600).

func init() {
	register(&command{
		Name:    "policy keygen",
		Summary: "make an ed25519 key pair for signing policy bundles (PREFIX.pub, PREFIX.key, PEM)",
		Usage:   "-o PREFIX",
		Flags:   func(fs *pflag.FlagSet) { addOutputFlag(fs) },
		Run:     runPolicyKeygen,
	})
	register(&command{
		Name:    "policy sign",
		Summary: "sign a policy module into a bundle (a directory, or .tar.gz by name)",
		Usage:   "--key KEY --name N --revision R [--expires DURATION|DATE] [--min-engine V] POLICY.wasm -o BUNDLE",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("key", "", "private key file (PEM, from 'policy keygen')")
			fs.String("name", "", "policy name recorded in the manifest")
			fs.Int64("revision", 0, "bundle revision (positive, must increase with every update)")
			fs.String("min-engine", "0.0.0", "lowest edgellm version that may load the bundle (semver)")
			fs.String("expires", "", "when hosts stop accepting the bundle: a duration from now (720h, 30d), a date (2026-12-31, UTC) or an RFC 3339 time; '' = never (not recommended)")
			addOutputFlag(fs)
		},
		Run: runPolicySign,
	})
	register(&command{
		Name:    "policy verify",
		Summary: "verify a policy bundle's signature, digests, expiry, ABI and engine version",
		Usage:   "--pub KEY.pub|TRUSTDIR BUNDLE",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("pub", "", "trusted public key file (PEM or base64), or a trust directory (*.pub and an optional 'revoked' list)")
			addJSONFlag(fs)
		},
		Run: runPolicyVerify,
	})
	register(&command{
		Name:    "policy log",
		Summary: "print a decision log (JSONL) as a table",
		Usage:   "FILE [--json]",
		Flags:   func(fs *pflag.FlagSet) { addJSONFlag(fs) },
		Run:     runPolicyLog,
	})
}

func addOutputFlag(fs *pflag.FlagSet) {
	fs.StringP("output", "o", "", "output file (default: stdout)")
}

type policyKeygenOptions struct {
	Output string `koanf:"output"`
}

func runPolicyKeygen(c *cmdEnv, args []string) error {
	var o policyKeygenOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) > 0 || o.Output == "" {
		return usagef("policy keygen takes no arguments and needs -o PREFIX")
	}
	pub, priv, err := policy.GenerateKey()
	if err != nil {
		return err
	}
	pubPEM, err := policy.MarshalPublicKey(pub)
	if err != nil {
		return err
	}
	privPEM, err := policy.MarshalPrivateKey(priv)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		data []byte
		perm os.FileMode
	}{{o.Output + ".key", privPEM, 0o600}, {o.Output + ".pub", pubPEM, 0o644}} {
		if err := os.WriteFile(f.path, f.data, f.perm); err != nil {
			return err
		}
	}
	c.Logf("wrote %s.pub and %s.key (keep the .key secret)", o.Output, o.Output)
	return nil
}

type policySignOptions struct {
	Key       string `koanf:"key"`
	Name      string `koanf:"name"`
	Revision  int64  `koanf:"revision"`
	MinEngine string `koanf:"min-engine"`
	Expires   string `koanf:"expires"`
	Output    string `koanf:"output"`
}

// maxSignExpiry bounds --expires (a typo such as 200000d once overflowed
// to a date in 1989).
const maxSignExpiry = 10 * 366 * 24 * time.Hour

func runPolicySign(c *cmdEnv, args []string) error {
	var o policySignOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	switch {
	case len(args) != 1:
		return usagef("policy sign needs exactly one POLICY.wasm")
	case o.Key == "":
		return usagef("--key is required")
	case o.Output == "":
		return usagef("-o BUNDLE is required (a directory, or a .tar.gz)")
	case o.Revision <= 0:
		return usagef("--revision must be positive, got %d", o.Revision)
	}
	if o.Name == "" {
		o.Name = strings.TrimSuffix(filepath.Base(args[0]), ".wasm")
	}
	priv, err := policy.ReadPrivateKeyFile(o.Key)
	if err != nil {
		return err
	}
	wasm, err := update.ReadRegularFile(args[0], policy.DefaultMaxBundleBytes)
	if err != nil {
		return err
	}
	if len(wasm) < 4 || string(wasm[:4]) != "\x00asm" {
		return fmt.Errorf("%s: not a Wasm module", args[0])
	}
	// The host's loader first: a module every host refuses is not signed,
	// and the manifest records the ABI the module speaks, not this
	// signer's.
	v, err := policy.ValidateModule(c.Ctx, policy.NewConfig().WithCacheDir("-"), wasm)
	if err != nil {
		return fmt.Errorf("%s: the host's loader refuses it, not signed: %w", args[0], err)
	}
	m := policy.Manifest{Name: o.Name, Revision: o.Revision, ABIVersion: v.String(), MinEngineVersion: o.MinEngine}
	if o.Expires != "" {
		now := time.Now()
		t, err := parseExpires(o.Expires, now)
		if err != nil {
			return usagef("%v", err)
		}
		if !t.After(now) {
			return usagef("--expires %q: %s is already past: refusing to sign an expired bundle", o.Expires, t.UTC().Format(time.RFC3339))
		}
		if t.After(now.Add(maxSignExpiry)) {
			return usagef("--expires %q: %s is more than 10 years away", o.Expires, t.UTC().Format(time.RFC3339))
		}
		m.Expires = t.UTC().Format(time.RFC3339)
	}
	b, err := policy.SignBundle(wasm, m, priv)
	if err != nil {
		return err
	}
	if err := b.Write(o.Output); err != nil {
		return err
	}
	exp := b.Manifest.Expires
	if exp == "" {
		exp = "never"
	}
	c.Logf("signed %s revision %d with key %s, expires %s (%s sha256 %s) -> %s", o.Name, o.Revision, b.KeyID, exp, policy.PolicyFile, b.Manifest.Files[policy.PolicyFile], o.Output)
	return nil
}

type policyVerifyOptions struct {
	Pub  string `koanf:"pub"`
	JSON bool   `koanf:"json"`
}

func runPolicyVerify(c *cmdEnv, args []string) error {
	var o policyVerifyOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 1 || o.Pub == "" {
		return usagef("policy verify needs --pub KEY.pub and one BUNDLE")
	}
	td, err := policy.ReadTrust(o.Pub)
	if err != nil {
		return fmt.Errorf("--pub: %w", err)
	}
	b, err := policy.VerifyBundle(args[0], policy.VerifyOptions{Keys: td.Keys, Revoked: td.Revoked, Limits: policy.NewConfig().BundleLimits(), EngineVersion: host.Build().Version})
	if err != nil {
		return err
	}
	if o.JSON {
		return policyWriteJSON(c.Stdout, b.Manifest)
	}
	m := b.Manifest
	exp := m.Expires
	if exp == "" {
		exp = "never"
	}
	keyID := b.KeyID
	if keyID == "" {
		keyID = "unnamed"
	}
	fmt.Fprintf(c.Stdout, "OK %s revision %d abi %s min_engine %s expires %s key %s %s sha256 %s\n", m.Name, m.Revision, m.ABIVersion, m.MinEngineVersion, exp, keyID, policy.PolicyFile, m.Files[policy.PolicyFile])
	return nil
}

type policyLogOptions struct {
	JSON bool `koanf:"json"`
}

func runPolicyLog(c *cmdEnv, args []string) error {
	var o policyLogOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("policy log needs one FILE")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	recs, err := policy.ReadLog(f)
	if err != nil {
		return fmt.Errorf("%s: %v", args[0], err)
	}
	if o.JSON {
		return policyWriteJSON(c.Stdout, recs)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "STEP\tLAT µs\tREV\tOUTCOME\tTIER\tK\tWINDOW\tKV\tWHY\tREASON\t")
	for _, r := range recs {
		outcome := r.Outcome
		if r.Fallback != "" {
			outcome += "→" + r.Fallback
		}
		reason := r.Reason
		if len(r.Clamps) > 0 {
			reason = strings.TrimSpace(reason + " clamped:" + strings.Join(r.Clamps, ","))
		}
		if r.Detail != "" || r.Err != "" {
			reason = strings.TrimSpace(reason + " " + r.Detail + " " + firstLine(r.Err))
		}
		kv := r.KVType
		if kv == "" {
			kv = "-"
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t\n", r.Step, r.LatencyUS, r.Revision, outcome, r.Tier, r.SpecK, r.Window, kv, r.Logged, reason)
	}
	return tw.Flush()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func policyWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
