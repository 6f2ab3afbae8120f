// Package sharedtest locates the project's shared test assets (../shared beside
// the repository: models, vocabularies, text) for tests.
//
// The directory is $EDGELLM_SHARED when set (the Makefile sets it), else the
// first "shared" directory found beside the repository root, walking up from
// the working directory. Tests fail, not skip, when an asset is missing: CI
// always has ../shared.
package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the shared directory, or "" if it cannot be found.
func Dir() string {
	if d := os.Getenv("EDGELLM_SHARED"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			cand := filepath.Join(filepath.Dir(d), "shared")
			if st, err := os.Stat(cand); err == nil && st.IsDir() {
				return cand
			}
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// Path returns the path of a shared asset (e.g. "models/stories260K.gguf") and
// fails the test if it does not exist.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	d := Dir()
	if d == "" {
		tb.Fatalf("shared directory not found: set EDGELLM_SHARED or put ../shared beside the repository")
	}
	p := filepath.Join(d, rel)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("shared asset: %v", err)
	}
	return p
}

// Stories260K is the path of the real stories260K model.
func Stories260K(tb testing.TB) string { tb.Helper(); return Path(tb, "models/stories260K.gguf") }
