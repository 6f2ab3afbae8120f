//go:build linux

package pressure

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgellm/edgellm/internal/sharedtest"
	"golang.org/x/sys/unix"
)

const runnerEnv = "EDGELLM_PRESSURE_TEST_RUNNER"

// TestMain lets the test binary act as a hog (StartHog re-executes it) and
// as a scenario runner (a child the tests interrupt or kill to check
// cleanup).
func TestMain(m *testing.M) {
	if code, ok := HogMode(); ok {
		os.Exit(code)
	}
	if os.Getenv(runnerEnv) == "1" {
		os.Exit(runnerMain())
	}
	os.Exit(m.Run())
}

// runnerMain is a miniature scenario runner: a cgroup with a limit, a hog in
// it, cleanup by defer when SIGINT/SIGTERM cancels the context.
func runnerMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cg, err := NewCgroup("runner")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer cg.Close()
	if err := cg.SetMemoryLimit(256 << 20); err != nil {
		fmt.Println("error", err)
		return 1
	}
	hog, err := StartHog(ctx, 16, HogOptions{Cgroup: cg})
	if err != nil || !hog.Ready() {
		fmt.Println("error hog", err)
		return 1
	}
	fmt.Printf("ready %d %s %s\n", hog.Pid(), cg.MemDir, cg.CPUDir)
	<-ctx.Done()
	return 0
}

// needCgroups skips when this machine does not let us create cgroups; the
// scenario runner falls back to simulated pressure in that case.
func needCgroups(t *testing.T) *Cgroup {
	t.Helper()
	cg, err := NewCgroup(strings.ReplaceAll(t.Name(), "/", "_"))
	if errors.Is(err, ErrUnavailable) {
		sharedtest.NoCgroups(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cg.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("cgroup v%d mem %s cpu %s", cg.Version, cg.MemDir, cg.CPUDir)
	return cg
}

func TestMemoryLimitAndOOMKill(t *testing.T) {
	cg := needCgroups(t)
	if err := cg.SetMemoryLimit(96 << 20); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A hog that fits: resident, charged to the cgroup, exits cleanly.
	hog, err := StartHog(ctx, 48, HogOptions{Cgroup: cg})
	if err != nil {
		t.Fatal(err)
	}
	if !hog.Ready() {
		t.Fatalf("48 MiB hog under a 96 MiB limit not ready: %v", hog.Wait())
	}
	if u, err := cg.MemoryUsage(); err != nil || u < 48<<20 {
		t.Errorf("cgroup usage %d MiB with a 48 MiB hog (err %v)", u>>20, err)
	}
	if pids, _ := cg.Procs(); len(pids) != 1 || pids[0] != hog.Pid() {
		t.Errorf("procs %v, want [%d]", pids, hog.Pid())
	}
	if r := hog.Stop(); r.Killed || r.ExitCode != 0 || !r.Ready {
		t.Errorf("fitting hog: %v", r)
	}
	before, err := cg.Events()
	if err != nil {
		t.Fatal(err)
	}
	// A hog that does not fit: the OOM killer kills it, and we see it.
	hog, err = StartHog(ctx, 200, HogOptions{Cgroup: cg})
	if err != nil {
		t.Fatal(err)
	}
	r := hog.Wait()
	after, _ := cg.Events()
	t.Logf("%v; oom_kill %d -> %d", r, before.OOMKill, after.OOMKill)
	if !r.Killed || r.Signal != syscall.SIGKILL || r.Ready {
		t.Errorf("200 MiB hog under 96 MiB: %v, want killed by SIGKILL before ready", r)
	}
	if after.OOMKill <= before.OOMKill {
		t.Errorf("oom_kill counter did not rise: %d -> %d", before.OOMKill, after.OOMKill)
	}
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat times, from
// the auxiliary vector (AT_CLKTCK): 100 on most Linux builds, not on all.
func clockTicks(t *testing.T) float64 {
	const atClkTck = 17
	auxv, err := unix.Auxv()
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range auxv {
		if kv[0] == atClkTck && kv[1] > 0 {
			return float64(kv[1])
		}
	}
	t.Fatal("no AT_CLKTCK in the auxiliary vector")
	return 0
}

// cpuTicks is the user+system CPU time of pid in clock ticks (clockTicks
// per second).
func cpuTicks(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

func TestCPUQuotaThrottles(t *testing.T) {
	cg := needCgroups(t)
	if cg.CPUDir == "" {
		sharedtest.NoCgroups(t, "no cpu controller")
	}
	if err := cg.SetCPUQuota(0.1); err != nil {
		t.Fatal(err)
	}
	spin := exec.Command("/bin/sh", "-c", "while :; do :; done")
	if err := cg.Start(spin); err != nil {
		t.Fatal(err)
	}
	defer func() { spin.Process.Kill(); spin.Wait() }()
	t0, c0 := time.Now(), cpuTicks(t, spin.Process.Pid)
	time.Sleep(time.Second)
	share := float64(cpuTicks(t, spin.Process.Pid)-c0) / clockTicks(t) / time.Since(t0).Seconds()
	st, err := cg.CPUStats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("busy loop under a 0.1-CPU quota used %.2f CPU; %+v", share, st)
	if share > 0.2 || st.Throttled == 0 {
		t.Errorf("quota 0.1 CPU: used %.2f CPU, throttled %d periods", share, st.Throttled)
	}
	if err := cg.RemoveCPUQuota(); err != nil {
		t.Error(err)
	}
}

func TestCloseKillsAndRemoves(t *testing.T) {
	cg := needCgroups(t)
	sleeper := exec.Command("sleep", "60")
	if err := cg.Start(sleeper); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sleeper.Wait() }()
	if err := cg.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err == nil {
			t.Error("sleeper exited cleanly; want killed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sleeper still running after Close")
	}
	for _, d := range []string{cg.MemDir, cg.CPUDir} {
		if _, err := os.Stat(d); d != "" && !os.IsNotExist(err) {
			t.Errorf("%s still exists", d)
		}
	}
	if err := cg.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// startRunner starts the test binary as a runner and returns it with the
// hog pid and cgroup directories it reported.
func startRunner(t *testing.T) (*exec.Cmd, int, []string) {
	t.Helper()
	needCgroups(t) // skip where cgroups are unusable
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runnerEnv+"=1")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("runner said %q", line)
	}
	pid, _ := strconv.Atoi(f[1])
	for _, d := range f[2:] {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("runner's cgroup %s: %v", d, err)
		}
	}
	return cmd, pid, f[2:]
}

func gone(t *testing.T, what string, check func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if check() {
			return
		}
	}
	t.Errorf("%s still there", what)
}

func TestRunnerInterruptedCleansUp(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, hogPid, dirs := startRunner(t)
			cmd.Process.Signal(sig)
			if err := cmd.Wait(); err != nil {
				t.Errorf("runner exit: %v", err)
			}
			for _, d := range dirs {
				gone(t, d, func() bool { _, err := os.Stat(d); return os.IsNotExist(err) })
			}
			gone(t, fmt.Sprintf("hog %d", hogPid), func() bool { return !pidAlive(hogPid) || isZombie(hogPid) })
		})
	}
}

// TestRunnerKilledSweptLater: a SIGKILLed runner cannot clean up; its hog
// dies with it and the next NewCgroup removes the stale cgroup.
func TestRunnerKilledSweptLater(t *testing.T) {
	cmd, hogPid, dirs := startRunner(t)
	cmd.Process.Kill()
	cmd.Wait()
	gone(t, fmt.Sprintf("hog %d", hogPid), func() bool { return !pidAlive(hogPid) || isZombie(hogPid) })
	if _, err := os.Stat(dirs[0]); err != nil {
		t.Fatalf("stale cgroup already gone before the sweep: %v", err)
	}
	cg, err := NewCgroup("sweeper")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("stale %s not swept", d)
		}
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	return strings.Contains(s[strings.LastIndexByte(s, ')'):], ") Z")
}

func TestHogWithoutCgroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hog, err := StartHog(ctx, 16, HogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hog.Ready() {
		t.Fatalf("not ready: %v", hog.Wait())
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", hog.Pid()))
	var rssKB int
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rssKB, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	if rssKB < 16<<10 {
		t.Errorf("hog RSS %d KiB, want ≥ 16 MiB", rssKB)
	}
	cancel() // the context kills it
	if r := hog.Wait(); !r.Killed || !r.Ready {
		t.Errorf("after cancel: %v", r)
	}
	// Hold: the hog frees its memory and exits by itself.
	hog, err = StartHog(context.Background(), 4, HogOptions{Hold: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-hog.Done():
		if r := hog.Wait(); r.Killed || r.ExitCode != 0 {
			t.Errorf("held hog: %v", r)
		}
	case <-time.After(5 * time.Second):
		t.Error("hog with Hold 50ms still running")
		hog.Stop()
	}
}

func TestBadArguments(t *testing.T) {
	if _, err := NewCgroup("a/b"); err == nil {
		t.Error("NewCgroup(a/b): no error")
	}
	if _, err := StartHog(context.Background(), 0, HogOptions{}); err == nil {
		t.Error("StartHog(0 MiB): no error")
	}
	cg := needCgroups(t)
	if err := cg.SetMemoryLimit(0); err == nil {
		t.Error("SetMemoryLimit(0): no error")
	}
	if err := cg.SetCPUQuota(-1); err == nil && cg.CPUDir != "" {
		t.Error("SetCPUQuota(-1): no error")
	}
	var ue *UnavailableError
	e := error(&UnavailableError{Reason: "read-only"})
	if !errors.As(e, &ue) || !errors.Is(e, ErrUnavailable) || !strings.Contains(e.Error(), "simulated") {
		t.Errorf("UnavailableError: %v", e)
	}
}
