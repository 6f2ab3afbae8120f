package main

import (
	"strings"
	"testing"
)

// With no model, no ../shared and no $EDGELLM_MODEL, run makes a small
// synthetic model (built-in byte tokenizer) and says so. $EDGELLM_SHARED,
// when set, is the only place the shared directory is looked for
// (internal/shareddir), so an empty one hides the real ../shared.
func TestRunDefaultSyntheticModel(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("EDGELLM_SHARED", t.TempDir()) // an empty shared directory
	t.Setenv("EDGELLM_MODEL", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("EDGELLM_TEST_SYNTH_DEFAULT", "1")
	if p := findShared(defaultModelName); p != "" {
		t.Fatalf("the default model is still reachable at %s", p)
	}
	_, errs, code := runCLI(t, "run", "-n", "8", "--threads", "1", "--temp", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "SYNTHETIC") || !strings.Contains(errs, "builtin:bytes") {
		t.Fatalf("synthetic model not labelled: %s", errs)
	}
}
