package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// exports parses `export NAME="VALUE"` lines.
func exports(t *testing.T, b []byte) map[string]string {
	t.Helper()
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "export ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("bad export line %q", sc.Text())
		}
		m[k] = strings.Trim(v, `"`)
	}
	return m
}

// TestMatchesMakefile holds the Makefile's flags (make -s env) and this
// command's (kernels/cflags) together: one set of flags, two spellings.
func TestMatchesMakefile(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "env")
	cmd.Dir = root
	mk, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -s env: %v", err)
	}
	var out bytes.Buffer
	if err := run(nil, &out); err != nil {
		t.Fatal(err)
	}
	want, got := exports(t, mk), exports(t, out.Bytes())
	for _, k := range []string{"CGO_ENABLED", "CGO_CPPFLAGS", "CGO_CFLAGS", "CGO_CXXFLAGS"} {
		if want[k] == "" || got[k] != want[k] {
			t.Errorf("%s:\n make   %q\n cgoenv %q", k, want[k], got[k])
		}
	}
}

// TestGoGetExample is what README "Embed in a Go program" tells a user to
// do: a fresh module outside this repository requires
// github.com/edgellm/edgellm (a replace to this checkout stands for the
// release), sets the cgo environment with `go run .../cmd/cgoenv`, and builds
// and runs the README's program, verbatim, on stories260K.
func TestGoGetExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program against llama.cpp (a link of ~20-60 s)")
	}
	model := filepath.Join(sharedtest.Dir(), "models", "stories260K.gguf")
	if _, err := os.Stat(model); err != nil {
		t.Skipf("no stories260K: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src := readmeBlock(t, readme, "<!-- go-get-example -->")
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", src)
	write("go.mod", "module example.com/app\n\ngo 1.26\n")
	// The checkout's go.sum vouches for every module it needs (CI's network
	// reaches the module proxy, not necessarily the checksum database).
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	goCmd := func(env []string, args ...string) []byte {
		t.Helper()
		c := exec.Command("go", args...)
		c.Dir = dir
		// Only what a user's shell has: not the Makefile's cgo flags.
		c.Env = append(cleanEnv(), env...)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// What `go get github.com/edgellm/edgellm/host` does once a version is
	// published; before that a replace stands for it.
	goCmd(nil, "mod", "edit", "-require", "github.com/edgellm/edgellm@v0.0.0", "-replace", "github.com/edgellm/edgellm="+root)
	goCmd(nil, "mod", "tidy")
	var env []string
	for k, v := range exports(t, goCmd(nil, "run", "github.com/edgellm/edgellm/cmd/cgoenv")) {
		env = append(env, k+"="+v)
	}
	goCmd(env, "build", "-o", "app", ".")
	run := exec.Command(filepath.Join(dir, "app"), model)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("app: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "there was a little girl named Lily") {
		t.Fatalf("app printed %q, want the stories260K greedy text", out)
	}
}

// readmeBlock is the fenced code block that follows marker.
func readmeBlock(t *testing.T, readme []byte, marker string) string {
	t.Helper()
	_, after, ok := strings.Cut(string(readme), marker)
	if !ok {
		t.Fatalf("README.md has no %s", marker)
	}
	_, body, ok := strings.Cut(after, "```go\n")
	if !ok {
		t.Fatalf("no ```go block after %s", marker)
	}
	body, _, ok = strings.Cut(body, "```")
	if !ok {
		t.Fatalf("unterminated block after %s", marker)
	}
	return body
}

// cleanEnv is the environment without the cgo flags make exported.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CGO_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}
