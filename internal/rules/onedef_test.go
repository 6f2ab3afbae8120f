package rules

import (
	"bytes"
	"go/ast"
	"go/token"
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
// (internal/native/synthmix.go), never a branch of the forward pass. Nor
// does it hold a package-level variable that a test of its package
// assigns (a switch flipped for every session of the process; #28's
// trimLastLayer was one): what a test varies is a field of the graph or
// of the options it builds with.
func TestGraphBuilderHasNoTestHooks(t *testing.T) {
	found := 0
	files := sourcesOf(t, true)
	for _, f := range files {
		if !contains(graphBuilders, f.rel) {
			continue
		}
		found++
		vars := packageVars(f.file)
		for _, tf := range files {
			if tf.pkg != f.pkg || !strings.HasSuffix(tf.rel, "_test.go") {
				continue
			}
			for _, a := range assignedNames(tf.file) {
				if vars[a.name] {
					t.Errorf("%s:%d assigns %s, a package variable of the graph builder %s: make it a field of the graph or its options",
						tf.rel, tf.fset.Position(a.pos).Line, a.name, f.rel)
				}
			}
		}
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

// packageVars are the names of f's package-level variables.
func packageVars(f *ast.File) map[string]bool {
	vars := map[string]bool{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, sp := range gd.Specs {
			for _, n := range sp.(*ast.ValueSpec).Names {
				if n.Name != "_" {
					vars[n.Name] = true
				}
			}
		}
	}
	return vars
}

type assigned struct {
	name string
	pos  token.Pos
}

// assignedNames are the bare identifiers f assigns to with =, op= or
// ++/-- (not :=, which declares a local), or whose address it takes.
func assignedNames(f *ast.File) []assigned {
	var out []assigned
	add := func(e ast.Expr) {
		if id, ok := e.(*ast.Ident); ok {
			out = append(out, assigned{id.Name, id.Pos()})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok != token.DEFINE {
				for _, l := range n.Lhs {
					add(l)
				}
			}
		case *ast.IncDecStmt:
			add(n.X)
		case *ast.UnaryExpr:
			if n.Op == token.AND {
				add(n.X)
			}
		}
		return true
	})
	return out
}
