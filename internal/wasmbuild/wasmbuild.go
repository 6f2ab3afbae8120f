// Package wasmbuild is the one definition of "compile a Go policy to
// WebAssembly": GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build
// -buildmode=c-shared -trimpath, a WASI reactor module. The CLI's `policy
// test` and the scenario runner build users' and built-in policies with it;
// every test that needs a Go guest does too.
//
// It always builds (into a path the caller owns) rather than reusing a
// policies/<name>/<name>.wasm left by make, so a test never runs a stale
// module; Go's build cache makes a rebuild of unchanged sources take well
// under a second.
package wasmbuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Command is the go build of the package main in dir to the module out;
// args are extra `go build` flags (e.g. "-ldflags=-X main.fixedTier=2").
// The child's environment is this process's with GOOS, GOARCH,
// CGO_ENABLED and GOFLAGS replaced.
func Command(ctx context.Context, dir, out string, args ...string) *exec.Cmd {
	argv := append([]string{"build", "-buildmode=c-shared", "-trimpath", "-o", out}, args...)
	cmd := exec.CommandContext(ctx, GoTool(), append(argv, ".")...)
	cmd.Dir = dir
	cmd.Env = append(withoutKeys(os.Environ(), "GOOS", "GOARCH", "CGO_ENABLED", "GOFLAGS"),
		"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	return cmd
}

// BuildFile runs Command; its error carries the compiler's output.
func BuildFile(ctx context.Context, dir, out string, args ...string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := Command(ctx, dir, abs, args...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // cancelled: say so (errors.Is)
		}
		return fmt.Errorf("building %s to wasm: %w: %s", dir, err, strings.TrimSpace(output.String()))
	}
	return nil
}

// Build compiles the package main in dir to outDir/<base of dir>.wasm and
// returns its path.
func Build(dir, outDir string, args ...string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	out := filepath.Join(outDir, filepath.Base(abs)+".wasm")
	return out, BuildFile(context.Background(), abs, out, args...)
}

// GoTool is the go command of the toolchain that built this program (a
// test binary's), else "go" from PATH.
func GoTool() string {
	if root := runtime.GOROOT(); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func withoutKeys(env []string, keys ...string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, k := range keys {
			if strings.HasPrefix(kv, k+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}
