package main

import (
	"encoding/json"
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

// TestBenchEvictFlag: bench --window --evict merge runs every repeat's
// session with merging, read back from the session into the result
// (JSON kv_evict, and a text line); plain bench reports drop; the modes
// that do not decode with a window refuse the flags.
func TestBenchEvictFlag(t *testing.T) {
	model := sharedtest.Stories260K(t)
	args := []string{"bench", "-m", model, "--engine", "native", "-p", "8", "-n", "40", "-r", "2", "-t", "1", "--ctx", "64"}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--window", "16", "--anchors", "4", "--evict", "merge"}, "merge"},
		{[]string{"--window", "16", "--anchors", "4"}, "drop"},
		{nil, "drop"},
	} {
		out, errs, code := runCLI(t, append(append(args, c.flags...), "--json")...)
		var r struct {
			KVEvict string `json:"kv_evict"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.KVEvict != c.want {
			t.Errorf("%v: exit %d, kv_evict %q, want %q: %s", c.flags, code, r.KVEvict, c.want, errs)
		}
	}
	out, errs, code := runCLI(t, append(args, "--window", "16", "--evict", "merge")...)
	if code != 0 || !strings.Contains(out, "native: KV window eviction merge") {
		t.Errorf("text output: exit %d, %q %s", code, out, errs)
	}
	for _, b := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--evict", "merge"}, "needs --window or --policy"},
		{[]string{"--window", "16", "--evict", "merge", "--activations"}, "are for the throughput bench"},
	} {
		_, errs, code := runCLI(t, append(args, b.flags...)...)
		if code != 2 || !strings.Contains(errs, b.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 with %q", b.flags, code, errs, b.want)
		}
	}
}
