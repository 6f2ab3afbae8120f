package rules

import (
	"bytes"
	"testing"
)

// oneDefinition maps a snippet that only one file may hold to that file:
// the algorithm it names is defined once, and everything else (tests
// included) calls it.
var oneDefinition = map[string]string{
	`"GOOS=wasip1"`: "internal/wasmbuild/wasmbuild.go", // building a Go policy to Wasm
}

// TestOneDefinition: each snippet of oneDefinition appears in its file
// only, across every .go file of the module, tests included (testdata
// and node_modules aside).
func TestOneDefinition(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range sourcesOf(t, true) {
		for snippet, home := range oneDefinition {
			if !bytes.Contains(f.src, []byte(snippet)) {
				continue
			}
			if f.rel == home {
				seen[snippet] = true
			} else if f.rel != "internal/rules/onedef_test.go" {
				t.Errorf("%s holds %s, which only %s may: call it instead", f.rel, snippet, home)
			}
		}
	}
	for snippet, home := range oneDefinition {
		if !seen[snippet] {
			t.Errorf("%s no longer holds %s: update oneDefinition", home, snippet)
		}
	}
}

// graphBuilders are the files that build the production forward pass.
var graphBuilders = []string{"internal/native/forward.go", "internal/native/family.go"}

// TestGraphBuilderHasNoTestHooks: the production graph builder holds no
// SYNTHETIC or test-only hook (issue #24.5): a benchmark's acceptance-
// controlled pair is a model file (synth.ZeroFrom) and a draft wrapper
// (internal/native/synthmix.go), never a branch of the forward pass.
func TestGraphBuilderHasNoTestHooks(t *testing.T) {
	found := 0
	for _, f := range sourcesOf(t, false) {
		if !contains(graphBuilders, f.rel) {
			continue
		}
		found++
		low := bytes.ToLower(f.src)
		for _, w := range []string{"synth", "simulated", "testhook"} {
			if bytes.Contains(low, []byte(w)) {
				t.Errorf("%s mentions %q: test and SYNTHETIC hooks live outside the graph builder", f.rel, w)
			}
		}
	}
	if found != len(graphBuilders) {
		t.Errorf("found %d of the graph builder files %v: update graphBuilders", found, graphBuilders)
	}
}
