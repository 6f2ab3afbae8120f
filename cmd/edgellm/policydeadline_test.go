package main

import (
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestRunPolicyDeadlineBadInput: a deadline that is not positive is refused
// with one line naming the flag and the value, before any policy is loaded.
func TestRunPolicyDeadlineBadInput(t *testing.T) {
	model := sharedtest.Stories260K(t)
	for _, d := range []string{"0s", "-1ms"} {
		_, errs, code := runCLI(t, "run", "-m", model, "-n", "4", "--threads", "1",
			"--policy", "missing.wasm", "--policy-insecure", "--policy-deadline", d)
		if code != 2 || !strings.Contains(errs, "--policy-deadline "+d) {
			t.Errorf("--policy-deadline %s: exit %d, stderr %q", d, code, errs)
		}
	}
}
