package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestRunWithPolicyInbox: run --policy-inbox loads a signed bundle found in
// the inbox; a second run (a restart) with only an older bundle there
// refuses it through the persisted rollback index and decodes with the
// built-in default.
func TestRunWithPolicyInbox(t *testing.T) {
	d := sharedtest.Path(t, "models/derived")
	tiers := filepath.Join(d, "stories260K-ff192-Q8_0.gguf") + "," + filepath.Join(d, "stories260K-ff192-Q4_0.gguf")
	wasm := buildPolicy(t, "default")
	dir := t.TempDir()
	key, inbox, state, staging := filepath.Join(dir, "k"), filepath.Join(dir, "inbox"), filepath.Join(dir, "state"), filepath.Join(dir, "staging")
	os.Mkdir(inbox, 0o755)
	os.Mkdir(staging, 0o755)
	if _, stderr, code := runCLI(t, "policy", "keygen", "-o", key); code != 0 {
		t.Fatal(stderr)
	}
	sign := func(rev, name string) {
		t.Helper()
		staged := filepath.Join(staging, name)
		if _, stderr, code := runCLI(t, "policy", "sign", "--key", key+".key", "--name", "default", "--revision", rev, "--expires", "1h", wasm, "-o", staged); code != 0 {
			t.Fatal(stderr)
		}
		if err := os.Rename(staged, filepath.Join(inbox, name)); err != nil { // the inbox contract
			t.Fatal(err)
		}
	}
	run := func() string {
		t.Helper()
		out, errs, code := runCLI(t, "run", "--tiers", tiers, "--policy-key", key+".pub", "--policy-state", state, "--policy-inbox", inbox,
			"--sensors", "trace:../../testdata/traces/thermal_ramp.jsonl", "--trace-step-ms", "50", "-n", "32", "--temp", "0", "--threads", "1")
		if code != 0 || !strings.HasPrefix(out, "Once upon a time") {
			t.Fatalf("run: exit %d, out %q: %s", code, out, errs)
		}
		return errs
	}
	sign("2", "default-2.tar.gz")
	if errs := run(); !strings.Contains(errs, "revision in service: 2") {
		t.Fatalf("bundle in the inbox not loaded: %s", errs)
	}
	os.Remove(filepath.Join(inbox, "default-2.tar.gz"))
	sign("1", "default-1.tar.gz")
	if errs := run(); !strings.Contains(errs, "revision in service: 0") {
		t.Fatalf("older bundle loaded after a restart: %s", errs)
	}
}
