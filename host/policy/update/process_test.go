package update

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHelperHoldState is not a test: TestStateDirLockTwoProcesses runs
// the test binary with it to hold a state directory from another process.
func TestHelperHoldState(t *testing.T) {
	state := os.Getenv("EDGELLM_UPDATE_HOLD_STATE")
	if state == "" {
		t.Skip("helper process for TestStateDirLockTwoProcesses")
	}
	root, err := os.ReadFile(os.Getenv("EDGELLM_UPDATE_HOLD_ROOT"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{Repo: os.Getenv("EDGELLM_UPDATE_HOLD_REPO"), TrustedRoot: root, StateDir: state, Name: "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
}

// TestStateDirLockTwoProcesses: issue #27's reproduction with two real
// processes on one state directory: the second is refused, naming the
// first's pid, until the first exits.
func TestStateDirLockTwoProcesses(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	state := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldState$", "-test.count=1")
	cmd.Env = append(os.Environ(), "EDGELLM_UPDATE_HOLD_STATE="+state, "EDGELLM_UPDATE_HOLD_ROOT="+r.RootPath(), "EDGELLM_UPDATE_HOLD_REPO="+r.PublishedDir())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper: %q %v", line, err)
	}
	o := Options{Repo: r.PublishedDir(), TrustedRoot: r.rootBytes(t), StateDir: state, Name: "fleet", Now: r.clk.Now}
	_, err = Open(o)
	if !errors.Is(err, ErrStateLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		t.Fatalf("second process: want ErrStateLocked naming pid %d, got %v", cmd.Process.Pid, err)
	}
	stdin.Close()
	cmd.Wait()
	c, err := Open(o)
	if err != nil {
		t.Fatalf("after the first process exited: %v", err)
	}
	defer c.Close()
	accept(t, c)
}

// TestStartPollsWithoutRestart: with a poll interval, a running runtime
// takes a new revision, and a revocation, without anyone calling Apply
// (issue #27: revocation needed a restart under a running serve).
func TestStartPollsWithoutRestart(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	srv := newServer(t, r.PublishedDir())
	rt := newPolicyRuntime(t)
	c := device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, nil)
	if err := Start(context.Background(), rt, c, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if rt.Revision() != 1 {
		t.Fatalf("after Start: revision %d", rt.Revision())
	}
	wait := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 30 s of polling", what)
			}
		}
	}
	r.publish(t, "fleet", variant(t, 2))
	wait("revision 2", func() bool { return rt.Revision() == 2 })
	if err := r.Remove("fleet"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RotateKey(RoleTargets, "", Expiries{}); err != nil {
		t.Fatal(err)
	}
	wait("revoked module out of service", func() bool { return rt.Revision() == 0 })
}
