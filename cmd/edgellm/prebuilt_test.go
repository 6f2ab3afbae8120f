//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/wasmbuild"
)

// prebuiltPolicies builds the builtin policies the scenarios name into one
// directory, once per test binary, and returns it: the scenario tests run
// as on a device, with --policy-dir and no build at run time.
var prebuilt struct {
	once sync.Once
	dir  string
	err  error
}

func prebuiltPolicies(t *testing.T) string {
	t.Helper()
	prebuilt.once.Do(func() {
		dir, err := os.MkdirTemp("", "edgellm-policies-")
		if err != nil {
			prebuilt.err = err
			return
		}
		prebuilt.dir = dir
		for _, name := range []string{"default", "static"} {
			if _, err := wasmbuild.Build(filepath.Join("..", "..", "policies", name), dir); err != nil {
				prebuilt.err = err
				return
			}
		}
	})
	if prebuilt.err != nil {
		t.Fatal(prebuilt.err)
	}
	return prebuilt.dir
}

// removePrebuilt is called by TestMain after the tests.
func removePrebuilt() {
	if prebuilt.dir != "" {
		os.RemoveAll(prebuilt.dir)
	}
}

// TestMain removes the prebuilt policies after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	removePrebuilt()
	os.Exit(code)
}

// TestScenarioPolicySources: built-in policies come from --policy-dir, from
// the source tree's `make policies` output (refused when older than its
// sources), or from a build only with --build-policies; each failure is one
// line saying what to do, before any model is synthesized.
func TestScenarioPolicySources(t *testing.T) {
	b, err := os.ReadFile("../../testdata/scenarios/memory-hog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vocab := sharedtest.Stories260K(t)
	text := strings.ReplaceAll(string(b), "../../../shared/models/stories260K.gguf", vocab)

	// A scenario outside any source tree, run from outside it (a device).
	outside := t.TempDir()
	spec := filepath.Join(outside, "s.yaml")
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// A source tree whose static.wasm is older than its main.go.
	tree := t.TempDir()
	for f, content := range map[string]string{
		"go.mod":                        "module github.com/edgellm/edgellm\n",
		"policies/static/main.go":       "package main\n",
		"policies/static/static.wasm":   "\x00asm",
		"policies/default/main.go":      "package main\n",
		"policies/default/default.wasm": "\x00asm",
		"s.yaml":                        text,
	} {
		p := filepath.Join(tree, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(tree, "policies/static/static.wasm"), old, old)
	os.Remove(filepath.Join(tree, "policies/default/default.wasm"))

	empty := t.TempDir()
	for _, c := range []struct {
		name string
		spec string
		args []string
		want string
	}{
		{"no source tree", spec, nil, "--policy-dir"},
		{"not in --policy-dir", spec, []string{"--policy-dir", empty}, filepath.Join(empty, "static.wasm")},
		{"stale prebuilt", filepath.Join(tree, "s.yaml"), nil, "static.wasm is older than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Chdir(outside)
			o := t.TempDir()
			_, errs, code := runCLI(t, append([]string{"scenario", "run", c.spec, "-o", o, "--simulate"}, c.args...)...)
			if code == 0 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want one line naming %q", code, errs, c.want)
			}
			if m, _ := filepath.Glob(filepath.Join(o, "*.gguf")); len(m) != 0 {
				t.Errorf("a model was synthesized before the policy check: %v", m)
			}
		})
	}
	// Fresh in the tree: static passes, default (not built) is named.
	now := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(tree, "policies/static/static.wasm"), now, now)
	t.Chdir(outside)
	_, errs, code := runCLI(t, "scenario", "run", filepath.Join(tree, "s.yaml"), "-o", t.TempDir(), "--simulate")
	if code == 0 || !strings.Contains(errs, "default.wasm is not built: run `make policies`") {
		t.Fatalf("exit %d, stderr %q; want default.wasm not built", code, errs)
	}
}
