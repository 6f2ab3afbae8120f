package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/runstats"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestRunDraft: run --draft prints the same greedy text as a plain run and
// the speculation summary; K above the maximum is clamped with a notice;
// bad drafts are one-line errors.
func TestRunDraft(t *testing.T) {
	d := sharedtest.Path(t, "models/derived")
	target := filepath.Join(d, "stories260K-ff192-f32.gguf")
	base := []string{"run", "-m", target, "-p", "Once upon a time", "-n", "48", "--temp", "0", "--threads", "1"}
	plain, errs, code := runCLI(t, base...)
	if code != 0 {
		t.Fatalf("plain: exit %d: %s", code, errs)
	}
	statsPath := filepath.Join(t.TempDir(), "stats.jsonl")
	spec, errs, code := runCLI(t, append(base, "--draft", filepath.Join(d, "stories260K-ff192-Q8_0.gguf"), "--spec-k", "12", "--stats-json", statsPath)...)
	if code != 0 {
		t.Fatalf("--draft: exit %d: %s", code, errs)
	}
	if spec != plain {
		t.Fatalf("speculative text differs from plain:\n%q\n%q", spec, plain)
	}
	// The header names the K in force after clamping (issue #30).
	for _, want := range []string{"--spec-k 12 is above the maximum 8: using 8", ", K 8, draft KV", "acceptance", "mean accepted length", "draft", "verify"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
	checkDraftStats(t, statsPath, 48)
	for _, c := range []struct{ draft, want string }{
		{"skip:5", "skip:5"},
		{"self:q4_0", "self:q4_0"},
		{filepath.Join(t.TempDir(), "missing.gguf"), "missing.gguf"},
	} {
		_, errs, code := runCLI(t, append(base, "--draft", c.draft)...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("--draft %s: exit %d, stderr %q (want an error naming %q)", c.draft, code, errs, c.want)
		}
	}
}

// TestRunDraftPolicy: under the default policy (which moves K from the
// measured acceptance and costs, so the K it picks depends on the machine)
// the text is still the plain greedy text and the policy was called.
func TestRunDraftPolicy(t *testing.T) {
	d := sharedtest.Path(t, "models/derived")
	target := filepath.Join(d, "stories260K-ff192-f32.gguf")
	wasm := buildPolicy(t, "default")
	base := []string{"run", "-m", target, "-p", "Once upon a time", "-n", "120", "--temp", "0", "--threads", "1"}
	plain, errs, code := runCLI(t, base...)
	if code != 0 {
		t.Fatalf("plain: exit %d: %s", code, errs)
	}
	spec, errs, code := runCLI(t, append(base, "--draft", "skip:3", "--spec-k", "2", "--policy", wasm, "--policy-insecure")...)
	if code != 0 {
		t.Fatalf("--draft --policy: exit %d: %s", code, errs)
	}
	if strip := stripPolicyLines(spec); strip != plain {
		t.Fatalf("speculative text under the policy differs from plain:\n%q\n%q", strip, plain)
	}
	if !strings.Contains(errs, "policy: ") || strings.Contains(errs, "policy: 0 calls") || !strings.Contains(errs, "speculation: acceptance") {
		t.Fatalf("policy not called or no speculation summary: %s", errs)
	}
}

// stripPolicyLines removes the adapter's "[policy step …]" notes from text.
func stripPolicyLines(s string) string {
	for {
		i := strings.Index(s, "[policy step ")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "]")
		if j < 0 {
			return s
		}
		s = s[:i] + s[i+j+1:]
	}
}

// checkDraftStats: --stats-json with --draft has a start, one token record
// per generated token, round records whose tokens tile the generation after
// the first token (each round yields accepted + 1 tokens, the last one
// possibly cut at -n) with K 8 and no more accepted than drafted, and an
// end record.
func checkDraftStats(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var rounds []runstats.Event
	tokens := 0
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		ev, err := runstats.Parse(l)
		if err != nil {
			t.Fatal(err)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != ev.Event {
			kinds = append(kinds, ev.Event)
		}
		switch ev.Event {
		case runstats.Token:
			tokens++
		case runstats.Round:
			rounds = append(rounds, ev)
		}
	}
	if kinds[0] != runstats.Start || kinds[len(kinds)-1] != runstats.End || tokens != n || len(rounds) == 0 {
		t.Fatalf("events %v, %d tokens, %d rounds", kinds, tokens, len(rounds))
	}
	next := 1
	for _, r := range rounds {
		if r.I != next || r.K != 8 || r.Accepted > r.Drafted || r.Drafted > 8 {
			t.Fatalf("round %+v, want i %d, k 8", r, next)
		}
		next += r.Accepted + 1
	}
	if next < n {
		t.Fatalf("rounds end at token %d of %d", next, n)
	}
}
