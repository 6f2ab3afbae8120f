package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// updateCLIDocs regenerates docs/cli.md:
//
//	go test ./cmd/edgellm -run TestCLIDocs -update
var updateCLIDocs = flag.Bool("update", false, "rewrite docs/cli.md from the CLI's own help")

const cliDocsPath = "../../docs/cli.md"

// cliDocs renders docs/cli.md: the top-level help and, for every registered
// command, the exact output of `edgellm help CMD`.
func cliDocs(t *testing.T) []byte {
	t.Helper()
	help := func(args ...string) string {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("edgellm %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
		return out.String()
	}
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)

	var b bytes.Buffer
	b.WriteString("# edgellm command reference\n\n")
	b.WriteString("<!-- Generated from the CLI's own help by\n")
	b.WriteString("     go test ./cmd/edgellm -run TestCLIDocs -update\n")
	b.WriteString("     (after `eval \"$(make -s env)\"`). Do not edit by hand: TestCLIDocs fails\n")
	b.WriteString("     when this page and `edgellm help CMD` differ. -->\n\n")
	b.WriteString("Every command below is `bin/edgellm COMMAND` after `make build`; the text is\n")
	b.WriteString("exactly what `bin/edgellm help COMMAND` prints.\n\n")
	b.WriteString("## Commands\n\n")
	for _, n := range names {
		fmt.Fprintf(&b, "- [`%s`](#%s) — %s\n", n, anchor(n), commands[n].Summary)
	}
	b.WriteString("\n## edgellm help\n\n```text\n")
	b.WriteString(help("help"))
	b.WriteString("```\n")
	for _, n := range names {
		fmt.Fprintf(&b, "\n## edgellm %s\n\n```text\n", n)
		b.WriteString(help(append([]string{"help"}, strings.Fields(n)...)...))
		b.WriteString("```\n")
	}
	return b.Bytes()
}

// anchor is the GitHub heading anchor of "## edgellm NAME".
func anchor(name string) string {
	return "edgellm-" + strings.ReplaceAll(name, " ", "-")
}

// TestCLIDocs: docs/cli.md is the CLI's own help for every registered
// command; it fails when a flag, default or summary changes without the page
// being regenerated (or the page is edited by hand).
func TestCLIDocs(t *testing.T) {
	want := cliDocs(t)
	if *updateCLIDocs {
		if err := os.WriteFile(cliDocsPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(cliDocsPath)
	if err != nil {
		t.Fatalf("%v (generate it: go test ./cmd/edgellm -run TestCLIDocs -update)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/cli.md differs from `edgellm help` at line %d:\n page: %q\n help: %q\nregenerate: go test ./cmd/edgellm -run TestCLIDocs -update", i+1, g, w)
			}
		}
	}
}
