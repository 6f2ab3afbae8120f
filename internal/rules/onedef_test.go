package rules

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	root := moduleRoot(t)
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		for snippet, home := range oneDefinition {
			if !bytes.Contains(src, []byte(snippet)) {
				continue
			}
			if rel == home {
				seen[snippet] = true
			} else if rel != "internal/rules/onedef_test.go" {
				t.Errorf("%s holds %s, which only %s may: call it instead", rel, snippet, home)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for snippet, home := range oneDefinition {
		if !seen[snippet] {
			t.Errorf("%s no longer holds %s: update oneDefinition", home, snippet)
		}
	}
}
