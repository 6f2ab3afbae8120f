// Package wasmbuild compiles a Go policy package to a WASI reactor module
// (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) for tests.
//
// It always builds (into a directory the caller owns) rather than reusing a
// policies/<name>/<name>.wasm left by make, so a test never runs a stale
// module; Go's build cache makes a rebuild of unchanged sources take well
// under a second.
package wasmbuild

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Build compiles the package main in dir to outDir/<base of dir>.wasm and
// returns its path; args are extra `go build` flags (e.g. "-ldflags=-X
// main.fixedTier=2"). Errors carry the compiler output.
func Build(dir, outDir string, args ...string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	out := filepath.Join(outDir, filepath.Base(abs)+".wasm")
	argv := append([]string{"build", "-buildmode=c-shared", "-trimpath", "-o", out}, args...)
	cmd := exec.Command(goTool(), append(argv, ".")...)
	cmd.Dir = abs
	cmd.Env = append(withoutKeys(os.Environ(), "GOOS", "GOARCH", "CGO_ENABLED", "GOFLAGS"),
		"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", errors.New("build " + dir + " to wasm: " + err.Error() + ": " + strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// goTool is the go command of the toolchain running the test, else "go".
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

func withoutKeys(env []string, keys ...string) []string {
	out := env[:0:0]
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
