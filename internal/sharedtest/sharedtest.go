// Package sharedtest locates the project's shared test assets (../shared beside
// the repository: models, vocabularies, text) for tests, by internal/shareddir's
// rule. Tests fail, not skip, when an asset is missing: CI always has
// ../shared.
package sharedtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/internal/shareddir"
)

// Dir returns the shared directory, or "" if it cannot be found.
func Dir() string { return shareddir.Dir() }

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
