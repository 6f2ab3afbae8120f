package main

import (
	"path/filepath"
	"strings"
	"testing"

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
	spec, errs, code := runCLI(t, append(base, "--draft", filepath.Join(d, "stories260K-ff192-Q8_0.gguf"), "--spec-k", "12")...)
	if code != 0 {
		t.Fatalf("--draft: exit %d: %s", code, errs)
	}
	if spec != plain {
		t.Fatalf("speculative text differs from plain:\n%q\n%q", spec, plain)
	}
	for _, want := range []string{"--spec-k 12 is above the maximum 8: using 8", "acceptance", "mean accepted length", "draft", "verify"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
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
