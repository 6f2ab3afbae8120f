package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/sharedtest"
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
	// Dates and bad values. Signing something already expired is refused
	// (issue #27); such a bundle, made through the API, fails verify.
	if _, stderr, code := runCLI(t, "policy", "sign", "--key", filepath.Join(dir, "new.key"), "--revision", "3", "--expires", "2000-01-01", testWasm, "-o", b); code != 2 || !strings.Contains(stderr, "already past") {
		t.Fatalf("sign with a past date: %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "policy", "sign", "--key", filepath.Join(dir, "new.key"), "--revision", "3", "--expires", "200000d", testWasm, "-o", b); code != 2 || !strings.Contains(stderr, "36,600 days") {
		t.Fatalf("sign with 200000d: %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "policy", "sign", "--key", filepath.Join(dir, "new.key"), "--revision", "3", "../../host/policy/testdata/abi2.wasm", "-o", b); code != 1 || !strings.Contains(stderr, "not signed") {
		t.Fatalf("sign an ABI 2 module: %d %s", code, stderr)
	}
	newKey, err := policy.ReadPrivateKeyFile(filepath.Join(dir, "new.key"))
	if err != nil {
		t.Fatal(err)
	}
	wasm, _ := os.ReadFile(testWasm)
	eb, err := policy.SignBundle(wasm, policy.Manifest{Name: "p", Revision: 3, ABIVersion: "1.0", MinEngineVersion: "0.0.0", Expires: "2000-01-01T00:00:00Z"}, newKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := eb.Write(b); err != nil {
		t.Fatal(err)
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

// TestPolicyRepoRun: the operator commands as typed, then run
// --policy-repo: the first run (a directory) takes revision 1, the next
// (the same repository over loopback HTTP) revision 2; a restart with the
// repository gone runs the last-good revision 2 (not the built-in
// default, not a refusal of an equal revision).
func TestPolicyRepoRun(t *testing.T) {
	d := sharedtest.Path(t, "models/derived")
	tiers := filepath.Join(d, "stories260K-ff192-Q8_0.gguf") + "," + filepath.Join(d, "stories260K-ff192-Q4_0.gguf")
	wasm := buildPolicy(t, "default")
	dir := t.TempDir()
	repo, state, empty := filepath.Join(dir, "repo"), filepath.Join(dir, "state"), filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	cli := func(want int, args ...string) string {
		t.Helper()
		out, errs, code := runCLI(t, args...)
		if code != want {
			t.Fatalf("%s: exit %d, want %d: %s%s", strings.Join(args, " "), code, want, out, errs)
		}
		return out + errs
	}
	cli(0, "policy", "repo", "init", repo)
	cli(0, "policy", "repo", "add", repo, "--name", "default", wasm)
	cli(0, "policy", "repo", "publish", repo)
	// The sign defects of issue #27, on the new commands.
	if s := cli(2, "policy", "repo", "publish", repo, "--timestamp-expires", "200000d"); !strings.Contains(s, "timestamp") {
		t.Fatalf("200000d: %s", s)
	}
	if s := cli(1, "policy", "repo", "add", repo, "--name", "default", "../../host/policy/testdata/abi2.wasm"); !strings.Contains(s, "ABI") {
		t.Fatalf("ABI 2 module: %s", s)
	}
	if s := cli(1, "policy", "repo", "add", repo, "--name", "default", "../../host/policy/testdata/bad_import.wasm"); !strings.Contains(s, "import") {
		t.Fatalf("bad import: %s", s)
	}
	root := filepath.Join(repo, "published", "root.json")
	run := func(from string) string {
		t.Helper()
		out, errs, code := runCLI(t, "run", "--tiers", tiers, "--policy-repo", from, "--policy-root", root, "--policy-name", "default",
			"--policy-state", state, "--policy-poll", "0",
			"--sensors", "trace:../../testdata/traces/thermal_ramp.jsonl", "--trace-step-ms", "50", "-n", "16", "--temp", "0", "--threads", "1")
		if code != 0 || !strings.HasPrefix(out, "Once upon a time") {
			t.Fatalf("run: exit %d, out %q: %s", code, out, errs)
		}
		return errs
	}
	pub := filepath.Join(repo, "published")
	if errs := run(pub); !strings.Contains(errs, "revision 1 in service") {
		t.Fatalf("first run: %s", errs)
	}
	// Revision 2: the same module plus a custom section ("rev" = 2).
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(wasm+"2", append(b, 0, 5, 3, 'r', 'e', 'v', 2), 0o644)
	cli(0, "policy", "repo", "add", repo, "--name", "default", "--revision", "2", wasm+"2")
	cli(0, "policy", "repo", "publish", repo)
	// The same repository over HTTP (loopback): the same updater.
	srv := httptest.NewServer(http.FileServer(http.Dir(pub)))
	defer srv.Close()
	if errs := run(srv.URL); !strings.Contains(errs, "revision 2 in service") {
		t.Fatalf("second run, over HTTP: %s", errs)
	}
	if errs := run(empty); !strings.Contains(errs, "revision 2 in service") {
		t.Fatalf("restart, repository unreachable: %s", errs)
	}
	if s := cli(0, "policy", "repo", "status", repo); !strings.Contains(s, "policy default revision 2") {
		t.Fatalf("status: %s", s)
	}
	if s := cli(0, "policy", "state", "--policy-state", state, "--policy-name", "default"); !strings.Contains(s, "last-good\tdefault revision 2") || !strings.Contains(s, "timestamp\tversion") {
		t.Fatalf("policy state --policy-name: %s", s)
	}
	// Printing a state that does not exist creates nothing.
	nothing := filepath.Join(dir, "nothing")
	cli(0, "policy", "state", "--policy-state", nothing)
	cli(0, "policy", "state", "--policy-state", nothing, "--policy-name", "default")
	if _, err := os.Stat(nothing); !os.IsNotExist(err) {
		t.Fatalf("policy state created %s", nothing)
	}
	if s := cli(0, "policy", "state", "--policy-state", state, "--policy-name", "default", "--reset"); !strings.Contains(s, "first boot") {
		t.Fatalf("reset: %s", s)
	}
	if errs := run(empty); !strings.Contains(errs, "revision 0 in service") {
		t.Fatalf("after a reset, with no repository: %s", errs)
	}
}

// TestPolicyRepoConvertBundle: migration: a bundle signed with `policy
// sign` is verified against its key and converted, keeping its name and
// revision; one signed by another key is refused.
func TestPolicyRepoConvertBundle(t *testing.T) {
	dir := t.TempDir()
	repo, key, other, b := filepath.Join(dir, "repo"), filepath.Join(dir, "k"), filepath.Join(dir, "o"), filepath.Join(dir, "b.tar.gz")
	for _, args := range [][]string{
		{"policy", "keygen", "-o", key},
		{"policy", "keygen", "-o", other},
		{"policy", "sign", "--key", key + ".key", "--name", "fleet", "--revision", "41", "--expires", "30d", testWasm, "-o", b},
		{"policy", "repo", "init", repo},
	} {
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: %s", args, stderr)
		}
	}
	if _, stderr, code := runCLI(t, "policy", "repo", "add", repo, "--bundle", b, "--pub", other+".pub"); code != 1 {
		t.Fatalf("bundle against another key: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "policy", "repo", "add", repo, "--bundle", b, "--pub", key+".pub"); code != 0 {
		t.Fatalf("convert: %s", stderr)
	}
	if _, stderr, code := runCLI(t, "policy", "repo", "publish", repo); code != 0 {
		t.Fatal(stderr)
	}
	if out, stderr, code := runCLI(t, "policy", "repo", "status", repo); code != 0 || !strings.Contains(out, "policy fleet revision 41, ABI 1.0") {
		t.Fatalf("status after conversion: %d %q %s", code, out, stderr)
	}
}
