package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/policy"
)

func TestPolicySignExpiresVerifyTrustDir(t *testing.T) {
	dir := t.TempDir()
	trust := filepath.Join(dir, "trust")
	os.Mkdir(trust, 0o755)
	for _, k := range []string{"old", "new"} {
		if _, stderr, code := runCLI(t, "policy", "keygen", "-o", filepath.Join(dir, k)); code != 0 {
			t.Fatalf("keygen: %s", stderr)
		}
		data, _ := os.ReadFile(filepath.Join(dir, k+".pub"))
		os.WriteFile(filepath.Join(trust, k+".pub"), data, 0o644)
	}
	oldPub, _ := policy.ReadPublicKeyFile(filepath.Join(dir, "old.pub"))
	b := filepath.Join(dir, "b.tar.gz")
	if _, stderr, code := runCLI(t, "policy", "sign", "--key", filepath.Join(dir, "old.key"), "--name", "p", "--revision", "2", "--expires", "30d", testWasm, "-o", b); code != 0 {
		t.Fatalf("sign: %s", stderr)
	}
	out, stderr, code := runCLI(t, "policy", "verify", "--pub", trust, b)
	want := time.Now().Add(30 * 24 * time.Hour).UTC().Format("2006-01-02")
	if code != 0 || !strings.Contains(out, "expires "+want) || !strings.Contains(out, "key "+policy.KeyID(oldPub)) {
		t.Fatalf("verify: %d %q %s", code, out, stderr)
	}
	// Revoke the old key: the same bundle is refused.
	os.WriteFile(filepath.Join(trust, policy.RevokedFile), []byte(policy.KeyID(oldPub)+"\n"), 0o644)
	if _, stderr, code := runCLI(t, "policy", "verify", "--pub", trust, b); code != 1 || !strings.Contains(stderr, "revoked") {
		t.Fatalf("verify with the key revoked: %d %s", code, stderr)
	}
	// Dates and bad values.
	if _, stderr, code := runCLI(t, "policy", "sign", "--key", filepath.Join(dir, "new.key"), "--revision", "3", "--expires", "2000-01-01", testWasm, "-o", b); code != 0 {
		t.Fatalf("sign with a date: %s", stderr)
	}
	if _, stderr, code := runCLI(t, "policy", "verify", "--pub", trust, b); code != 1 || !strings.Contains(stderr, "expired at 2000-01-01T00:00:00Z") {
		t.Fatalf("verify expired: %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "policy", "sign", "--key", filepath.Join(dir, "new.key"), "--revision", "3", "--expires", "soon", testWasm, "-o", b); code != 2 || !strings.Contains(stderr, `--expires "soon"`) {
		t.Fatalf("sign with a bad expiry: %d %s", code, stderr)
	}
}

func TestPolicyStateCommand(t *testing.T) {
	state := t.TempDir()
	os.WriteFile(filepath.Join(state, policy.RollbackFile), []byte(`{"format":1,"revisions":{"p":7}}`), 0o600)
	out, stderr, code := runCLI(t, "policy", "state", "--policy-state", state)
	if code != 0 || !strings.Contains(out, "p\t7") {
		t.Fatalf("state: %d %q %s", code, out, stderr)
	}
	os.WriteFile(filepath.Join(state, policy.RollbackFile), []byte(`{"format":1,`), 0o600)
	if _, stderr, code := runCLI(t, "policy", "state", "--policy-state", state); code != 1 || !strings.Contains(stderr, filepath.Join(state, policy.RollbackFile)) {
		t.Fatalf("corrupt state: %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "policy", "state", "--policy-state", state, "--reset"); code != 0 || !strings.Contains(stderr, "moved to") {
		t.Fatalf("reset: %d %s", code, stderr)
	}
	if out, _, code := runCLI(t, "policy", "state", "--policy-state", state); code != 0 || strings.Contains(out, "p\t") {
		t.Fatalf("after reset: %d %q", code, out)
	}
}

func TestParseExpires(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"720h", now.Add(720 * time.Hour)},
		{"30d", now.Add(30 * 24 * time.Hour)},
		{"2026-12-31", time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)},
		{"2026-06-01T10:00:00+02:00", time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)},
	} {
		got, err := parseExpires(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("parseExpires(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "-1h", "0d", "tomorrow"} {
		if _, err := parseExpires(bad, now); err == nil {
			t.Errorf("parseExpires(%q) accepted", bad)
		}
	}
}
