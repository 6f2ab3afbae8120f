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
