package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyNew scaffolds a policy outside the checkout and runs `policy
// test` on it as it stands: it must build and pass.
func TestPolicyNew(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go policy to Wasm")
	}
	sdk, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mypolicy")
	if _, stderr, code := runCLI(t, "policy", "new", dir, "--sdk", sdk); code != 0 {
		t.Fatalf("policy new: %d %s", code, stderr)
	}
	for _, f := range []string{"main.go", "policy_test.go", "testdata/thermal_ramp.jsonl", "go.mod", "go.sum"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("scaffold lacks %s: %v", f, err)
		}
	}
	out, stderr, code := runCLI(t, "policy", "test", dir)
	if code != 0 || !strings.Contains(out, "4 passed, 0 failed") {
		t.Fatalf("policy test on the scaffold: %d %q %s", code, out, stderr)
	}
	// A second scaffold into the same directory is refused; so is another language.
	if _, stderr, code := runCLI(t, "policy", "new", dir, "--sdk", sdk); code != 1 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("policy new into a non-empty dir: %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "policy", "new", filepath.Join(t.TempDir(), "p"), "--lang", "rust"); code != 2 || !strings.Contains(stderr, `--lang "rust"`) {
		t.Fatalf("policy new --lang rust: %d %s", code, stderr)
	}
}

// TestPolicyNewAssemblyScript: the AssemblyScript scaffold builds (npm
// installs the pinned compiler) and passes the same kind of table.
func TestPolicyNewAssemblyScript(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the AssemblyScript compiler with npm")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("EDGELLM_REQUIRE_AS") != "" {
			t.Fatal("npm not found")
		}
		t.Skip("npm not found")
	}
	sdk, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "aspolicy")
	if _, stderr, code := runCLI(t, "policy", "new", dir, "--lang", "assemblyscript", "--sdk", sdk); code != 0 {
		t.Fatalf("policy new: %d %s", code, stderr)
	}
	for _, f := range []string{"policy.ts", "package.json", "asconfig.json", "policy_test.go", "testdata/thermal_ramp.jsonl", "go.mod"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("scaffold lacks %s: %v", f, err)
		}
	}
	out, stderr, code := runCLI(t, "policy", "test", dir)
	if code != 0 || !strings.Contains(out, "2 passed, 0 failed") {
		t.Fatalf("policy test on the AssemblyScript scaffold: %d %q %s", code, out, stderr)
	}
}

// TestPolicyNewNextStepsAsTyped: `policy new NAME` from a relative path
// prints its next step; that step, run as printed from the same working
// directory, passes, for Go and for AssemblyScript (issue #27: the
// AssemblyScript one resolved node_modules/.bin/asc twice).
func TestPolicyNewNextStepsAsTyped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds policies to Wasm")
	}
	sdk, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	langs := []string{"go"}
	if _, err := exec.LookPath("npm"); err == nil {
		langs = append(langs, "assemblyscript")
	} else if os.Getenv("EDGELLM_REQUIRE_AS") != "" {
		t.Fatal("npm not found")
	}
	t.Chdir(t.TempDir())
	for _, lang := range langs {
		name := map[string]string{"go": "gopol", "assemblyscript": "aspol"}[lang]
		_, stderr, code := runCLI(t, "policy", "new", name, "--lang", lang, "--sdk", sdk)
		if code != 0 {
			t.Fatalf("policy new %s --lang %s: %d %s", name, lang, code, stderr)
		}
		_, next, ok := strings.Cut(stderr, "next: edgellm ")
		if !ok {
			t.Fatalf("policy new printed no next step: %s", stderr)
		}
		args := strings.Fields(strings.SplitN(next, "\n", 2)[0])
		out, stderr, code := runCLI(t, args...)
		if code != 0 || !strings.Contains(out, " passed, 0 failed") {
			t.Fatalf("%s: next step `edgellm %s` as printed: %d %q %s", lang, strings.Join(args, " "), code, out, stderr)
		}
	}
}
