// Package guestbuild compiles Go policy guests to Wasm for the tests of
// host/policy and its rewriter (test support, not used by the runtime).
package guestbuild

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/edgellm/edgellm/internal/wasmbuild"
)

var (
	mu    sync.Mutex
	built = map[string]string{}
)

// Build compiles the Go package main in dir to a WASI reactor once per
// test binary (Go's build cache makes it fast after the first time) and
// returns the .wasm's path.
func Build(t testing.TB, dir string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built[dir]; ok {
		return p
	}
	out, err := os.MkdirTemp("", "edgellm-guest")
	if err != nil {
		t.Fatal(err)
	}
	wasm := filepath.Join(out, "policy.wasm")
	if err := wasmbuild.BuildFile(context.Background(), dir, wasm); err != nil {
		t.Fatal(err)
	}
	built[dir] = wasm
	return wasm
}

// Modules are every committed fixture of host/policy/testdata plus the Go
// guests (testdata/goguest, policies/default and policies/static), by name;
// policyDir is host/policy relative to the working directory.
func Modules(t testing.TB, policyDir string) map[string]string {
	testdata := filepath.Join(policyDir, "testdata")
	paths, _ := filepath.Glob(filepath.Join(testdata, "*.wasm"))
	mods := map[string]string{}
	for _, p := range paths {
		mods[filepath.Base(p)] = p
	}
	mods["goguest"] = Build(t, filepath.Join(testdata, "goguest"))
	mods["default"] = Default(t, policyDir)
	static := filepath.Join(policyDir, "..", "..", "policies", "static")
	if _, err := os.Stat(filepath.Join(static, "main.go")); err == nil {
		mods["static"] = Build(t, static)
	}
	return mods
}

// Default builds policies/default when it exists, else testdata/goguest;
// policyDir is host/policy relative to the working directory.
func Default(t testing.TB, policyDir string) string {
	dir := filepath.Join(policyDir, "..", "..", "policies", "default")
	if _, err := os.Stat(filepath.Join(dir, "main.go")); err != nil {
		dir = filepath.Join(policyDir, "testdata", "goguest")
	}
	return Build(t, dir)
}
