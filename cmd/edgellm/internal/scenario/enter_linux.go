package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// enterEnv lists the cgroup.procs files an engine started by the runner on
// cgroup v1 writes its own pid to before anything else runs (see
// RATIONALE.md: on v1 a child cannot be started inside a cgroup, and moving
// it in after it started races with its first allocations).
const enterEnv = "EDGELLM_SCENARIO_CGROUP_PROCS"

// EnterMode moves this process into the cgroups the runner asked an engine
// it started to enter (enterEnv is set), and does nothing otherwise. The
// engine's main calls it before anything else runs (cmd/edgellm's main.go).
func EnterMode() error {
	v, ok := os.LookupEnv(enterEnv)
	if !ok {
		return nil
	}
	os.Unsetenv(enterEnv) // not for the engine's own children
	return enterCgroups(v)
}

// enterCgroups moves this process (all its threads) into the cgroups whose
// cgroup.procs files are listed in v, separated by ':'.
func enterCgroups(v string) error {
	pid := strconv.Itoa(os.Getpid())
	for _, f := range strings.Split(v, string(os.PathListSeparator)) {
		if filepath.Base(f) != "cgroup.procs" {
			return fmt.Errorf("%s=%q: not a cgroup.procs file", enterEnv, f)
		}
		if err := os.WriteFile(f, []byte(pid), 0); err != nil {
			return fmt.Errorf("cannot enter the scenario's cgroup: %w", err)
		}
	}
	return nil
}
