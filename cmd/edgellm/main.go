// Command edgellm runs the adaptive on-device LLM runtime: see README.md.
package main

import (
	"fmt"
	"os"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/pressure"
	"github.com/edgellm/edgellm/cmd/edgellm/internal/scenario"
)

func main() {
	if code, exit := childMode(); exit {
		os.Exit(code)
	}
	applyProcessEnv(os.LookupEnv, os.Stderr)
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// childMode is how edgellm runs as a child of its own scenario runner,
// chosen by the environment the runner sets: a memory hog (the process
// exits with code), or an engine that first enters the scenario's cgroups
// (cgroup v1) and then runs as usual.
func childMode() (code int, exit bool) {
	if code, ok := pressure.HogMode(); ok {
		return code, true
	}
	if err := scenario.EnterMode(); err != nil {
		fmt.Fprintf(os.Stderr, "edgellm: %v\n", err)
		return 1, true
	}
	return 0, false
}
