package main

import (
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestRunEvictFlag: run --evict merge folds evicted positions instead of
// dropping them: announced, and the greedy text past the window differs
// from --evict drop's; misuse is one usage line.
func TestRunEvictFlag(t *testing.T) {
	model := sharedtest.Stories260K(t)
	args := []string{"run", "-m", model, "--engine", "native", "--window", "8", "--anchors", "4",
		"-n", "60", "--ctx", "64", "--threads", "1", "--temp", "0"}
	drop, errs, code := runCLI(t, append(args, "--evict", "drop")...)
	if code != 0 || strings.Contains(errs, "KV eviction") {
		t.Fatalf("--evict drop: exit %d, %q", code, errs)
	}
	merge, errs, code := runCLI(t, append(args, "--evict", "merge")...)
	if code != 0 || !strings.Contains(errs, "KV eviction: merge") || !strings.HasPrefix(merge, "Once upon a time") {
		t.Fatalf("--evict merge: exit %d, %q, output %q", code, errs, merge)
	}
	if merge == drop {
		t.Errorf("--evict merge changed nothing: %q", merge)
	}
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "native", "--evict", "merge"}, "needs --window or --policy"},
		{[]string{"--engine", "native", "--window", "16", "--evict", "fold"}, "--evict fold"},
	}
	for _, b := range bad {
		_, errs, code := runCLI(t, append([]string{"run", "-m", model, "-n", "4", "--threads", "1"}, b.args...)...)
		if code != 2 || !strings.Contains(errs, b.want) || strings.Count(strings.TrimSpace(errs), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", b.args, code, errs, b.want)
		}
	}
}
