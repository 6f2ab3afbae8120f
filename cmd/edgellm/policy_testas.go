package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// An AssemblyScript policy directory (from `policy new --lang
// assemblyscript`) has asconfig.json and policy.ts; `policy test` builds it
// with the assemblyscript compiler its package.json pins, installing it
// with npm first if node_modules lacks it.

// isAssemblyScriptPolicy reports whether dir holds an AssemblyScript policy.
func isAssemblyScriptPolicy(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "asconfig.json"))
	return err == nil
}

// buildAssemblyScript compiles dir/policy.ts to wasm.
func buildAssemblyScript(c *cmdEnv, dir, wasm string) error {
	dir, err := filepath.Abs(dir) // asc below runs with Dir = dir
	if err != nil {
		return err
	}
	if wasm, err = filepath.Abs(wasm); err != nil {
		return err
	}
	asc := filepath.Join(dir, "node_modules", ".bin", "asc")
	if _, err := os.Stat(asc); err != nil {
		if _, err := exec.LookPath("npm"); err != nil {
			return fmt.Errorf("%s is an AssemblyScript policy and npm is not installed (needed once, to install its compiler)", dir)
		}
		c.Logf("installing the AssemblyScript compiler in %s (npm install)", dir)
		npm := exec.CommandContext(c.Ctx, "npm", "install", "--no-audit", "--no-fund")
		npm.Dir = dir
		if out, err := npm.CombinedOutput(); err != nil {
			return fmt.Errorf("npm install in %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		}
	}
	build := exec.CommandContext(c.Ctx, asc, "policy.ts", "--config", "asconfig.json", "--target", "release", "-o", wasm)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s/policy.ts to wasm: %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}
