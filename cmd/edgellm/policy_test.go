package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
)

const testWasm = "../../host/policy/testdata/good_a.wasm"

func TestPolicyKeygenSignVerify(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	if _, stderr, code := runCLI(t, "policy", "keygen", "-o", key); code != 0 {
		t.Fatalf("keygen: %d %s", code, stderr)
	}
	if fi, err := os.Stat(key + ".key"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key file: %v %v", fi, err)
	}
	for _, form := range []string{"b.tar.gz", "bdir"} {
		bundle := filepath.Join(dir, form)
		if _, stderr, code := runCLI(t, "policy", "sign", "--key", key+".key", "--name", "a", "--revision", "3", "--min-engine", "0.1.0", testWasm, "-o", bundle); code != 0 {
			t.Fatalf("sign: %d %s", code, stderr)
		}
		out, stderr, code := runCLI(t, "policy", "verify", "--pub", key+".pub", bundle)
		if code != 0 || !strings.HasPrefix(out, "OK a revision 3 abi 1.0 min_engine 0.1.0 expires never key ") /* the module's ABI (good_a speaks 1.0), not the signer's */ {
			t.Fatalf("verify %s: %d %q %s", form, code, out, stderr)
		}
		// The runtime accepts it with the same key.
		pub, err := policy.ReadPublicKeyFile(key + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		r, err := policy.NewRuntime(ctx, policy.NewConfig().WithCacheDir("-").WithTrustedKey(pub).WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.LoadFile(ctx, bundle); err != nil {
			t.Fatal(err)
		}
		r.Close(ctx)
	}
	// Tampered module: verify fails with the digest mismatch.
	bdir := filepath.Join(dir, "bdir")
	data, _ := os.ReadFile(filepath.Join(bdir, policy.PolicyFile))
	data[len(data)-1] ^= 1
	os.WriteFile(filepath.Join(bdir, policy.PolicyFile), data, 0o644)
	_, stderr, code := runCLI(t, "policy", "verify", "--pub", key+".pub", bdir)
	if code != 1 || !strings.Contains(stderr, "digest mismatch for policy.wasm (want ") {
		t.Fatalf("verify tampered: %d %s", code, stderr)
	}
	// Another key: bad signature.
	runCLI(t, "policy", "keygen", "-o", filepath.Join(dir, "k2"))
	_, stderr, code = runCLI(t, "policy", "verify", "--pub", filepath.Join(dir, "k2.pub"), filepath.Join(dir, "b.tar.gz"))
	if code != 1 || !strings.Contains(stderr, "does not verify with any trusted key") {
		t.Fatalf("verify with other key: %d %s", code, stderr)
	}
}

func TestPolicySignUsage(t *testing.T) {
	for _, args := range [][]string{
		{"policy", "sign", testWasm, "-o", "x"},
		{"policy", "sign", "--key", "k", "--revision", "0", testWasm, "-o", "x"},
		{"policy", "keygen"},
		{"policy", "verify", "b"},
		{"policy", "log"},
		{"policy", "test"},
	} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestPolicyLog(t *testing.T) {
	ctx := context.Background()
	logPath := filepath.Join(t.TempDir(), "d.jsonl")
	r, err := policy.NewRuntime(ctx, policy.NewConfig().WithCacheDir("-").WithInsecure(true).
		WithLogger(slog.New(slog.DiscardHandler)).WithDecisionLog(policy.DecisionLogConfig{Path: logPath, Every: 2}))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.LoadFile(ctx, testWasm); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		s, d := abi.Sensors{}, abi.Decision{}
		r.Decide(ctx, &s, &d)
	}
	r.Close(ctx)
	out, stderr, code := runCLI(t, "policy", "log", logPath)
	if code != 0 {
		t.Fatalf("%d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "STEP") || !strings.Contains(lines[1], "ok") {
		t.Fatalf("table:\n%s", out)
	}
	// Right-aligned columns: the TIER column ends at the same rune offset.
	tierEnd := utf8.RuneCountInString(lines[0][:strings.Index(lines[0], "TIER")+len("TIER")])
	for _, l := range lines[1:] {
		r := []rune(l)
		if len(r) < tierEnd || r[tierEnd-1] != '0' || r[tierEnd] != ' ' {
			t.Fatalf("unaligned table:\n%s", out)
		}
	}
	out, _, code = runCLI(t, "policy", "log", "--json", logPath)
	if code != 0 || !strings.Contains(out, `"outcome": "ok"`) {
		t.Fatalf("--json: %d %s", code, out)
	}
}

func TestPolicyTestNoTests(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module notests\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	out, stderr, code := runCLI(t, "policy", "test", dir)
	if code != 1 || !strings.Contains(stderr, "no test ran") || !strings.Contains(out, "0 passed, 0 failed") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
}

func TestPolicyTestRunsPolicyTests(t *testing.T) {
	dir := "../../policies/static"
	if _, err := os.Stat(filepath.Join(dir, "static_test.go")); err != nil {
		t.Fatalf("reference policy missing: %v", err)
	}
	out, stderr, code := runCLI(t, "policy", "test", dir)
	if code != 0 || !strings.Contains(out, " passed, 0 failed") || strings.HasPrefix(out, "0 passed") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	t.Logf("%s", strings.TrimSpace(out))
}
