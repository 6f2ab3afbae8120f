package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edgellm/edgellm/host/policy"
)

// policyStateHelp documents --policy-state's default.
const policyStateHelp = "policy state directory: with --policy-repo, repo-NAME/ holds the trusted TUF metadata and the last-good module (one process at a time); otherwise the rollback index rollback.json; default $XDG_STATE_HOME/edgellm/policy-state, else ~/.local/state/edgellm/policy-state; '-' = in memory only (rollback protection lost on restart; refused with --policy-repo)"

// defaultPolicyStateDir is where the rollback index lives unless
// --policy-state says otherwise.
func defaultPolicyStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "edgellm", "policy-state"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("--policy-state: no default (%v); set it", err)
	}
	return filepath.Join(home, ".local", "state", "edgellm", "policy-state"), nil
}

// resolvePolicyStateDir turns the flag into a directory ("" = memory only).
func resolvePolicyStateDir(flag string) (string, error) {
	switch flag {
	case "-":
		return "", nil
	case "":
		return defaultPolicyStateDir()
	}
	return flag, nil
}

// parseExpires parses --expires: a duration from now (Go syntax, plus "d"
// for days: 720h, 30d), a date (2026-12-31, midnight UTC) or an RFC 3339
// time.
func parseExpires(s string, now time.Time) (time.Time, error) {
	if strings.HasSuffix(s, "d") {
		if n, err := strconv.Atoi(strings.TrimSuffix(s, "d")); err == nil && n > 0 {
			if n > 100*366 { // time.Duration overflows near 106,751 days
				return time.Time{}, fmt.Errorf("--expires %q: more than 36,600 days", s)
			}
			return now.Add(time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--expires %q: the duration must be positive", s)
		}
		return now.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--expires %q: want a duration (720h, 30d), a date (2026-12-31) or an RFC 3339 time", s)
}

// policyUpdateConfig adds the trusted keys, revocations and rollback index
// of the flags to cfg.
func policyUpdateConfig(cfg policy.Config, o policyOptions) (policy.Config, error) {
	if o.PolicyKey != "" {
		td, err := policy.ReadTrust(o.PolicyKey)
		if err != nil {
			return cfg, fmt.Errorf("--policy-key: %w", err)
		}
		cfg = cfg.WithTrustDir(td)
	}
	if o.PolicyInsecure {
		// Development loads (unsigned, loose modules) never move the
		// persisted rollback floor that signed updates are held to.
		return cfg.WithStateDir(""), nil
	}
	dir, err := resolvePolicyStateDir(o.PolicyState)
	if err != nil {
		return cfg, err
	}
	return cfg.WithStateDir(dir), nil
}

// startInbox watches --policy-inbox, if set; the runtime's Close stops it.
func startInbox(c *cmdEnv, rt *policy.Runtime, o policyOptions) error {
	if o.PolicyInbox == "" {
		return nil
	}
	in, err := rt.WatchInbox(c.Ctx, o.PolicyInbox)
	if err != nil {
		return fmt.Errorf("--policy-inbox: %w", err)
	}
	c.Logf("policy: watching inbox %s (revision in service: %d)", in.Dir(), rt.Revision())
	return nil
}
