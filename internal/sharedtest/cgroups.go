package sharedtest

import (
	"os"
	"testing"
)

// AllowNoCgroupsEnv names the variable that lets cgroup-dependent tests
// skip. Real memory and CPU pressure (cgroups) is the project's core claim,
// so a machine where cgroups cannot be written fails those tests unless
// this variable is 1: set it on a laptop or in a container without a
// writable cgroup tree, knowing the claim is then not tested.
const AllowNoCgroupsEnv = "EDGELLM_ALLOW_NO_CGROUPS"

// NoCgroups is called by a test that needs writable cgroups and found none
// (why says what failed): it skips when AllowNoCgroupsEnv=1, else fails.
func NoCgroups(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(AllowNoCgroupsEnv) == "1" {
		t.Skipf("cgroups not writable here (%s); skipped because %s=1", why, AllowNoCgroupsEnv)
	}
	t.Fatalf("cgroups not writable here (%s): this test needs them; set %s=1 to accept skipping it", why, AllowNoCgroupsEnv)
}
