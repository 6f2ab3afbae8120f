//go:build linux

package pressure

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgellm/edgellm/internal/cputime"
	"golang.org/x/sys/unix"
)

// A CPU hog is this executable re-executed with cpuHogEnv set to a CPU list:
// one busy thread per entry, each pinned to that CPU (see HogMode).
const cpuHogEnv = "EDGELLM_PRESSURE_CPUHOG_CPUS"

// cpuHogMode runs this process as a CPU hog when StartCPUHog started it as
// one.
func cpuHogMode() (code int, ok bool) {
	v, ok := os.LookupEnv(cpuHogEnv)
	if !ok {
		return 0, false
	}
	return cpuHogMain(v, os.Stdin, os.Stdout), true
}

// cpuHogMain is the CPU hog: wait for "go" on stdin (the parent has put it
// in its cgroup), start one busy thread per CPU of list pinned to it, say
// "ready" once all spin, and spin until stdin closes.
func cpuHogMain(list string, in io.Reader, out io.Writer) int {
	var cpus []int
	for _, f := range strings.Split(list, ",") {
		c, err := strconv.Atoi(f)
		if err != nil || c < 0 || c >= 1024 {
			fmt.Fprintf(os.Stderr, "cpu hog: bad %s=%q\n", cpuHogEnv, list)
			return 2
		}
		cpus = append(cpus, c)
	}
	br := bufio.NewReader(in)
	if line, err := br.ReadString('\n'); err != nil || line != "go\n" {
		return 0 // the parent went away before the go-ahead
	}
	runtime.GOMAXPROCS(len(cpus) + 1) // the busy threads and one for the rest
	var started, stop atomic.Int32
	errc := make(chan error, len(cpus))
	for _, c := range cpus {
		go func() {
			runtime.LockOSThread() // this OS thread spins: never handed back
			var set unix.CPUSet
			set.Set(c)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errc <- fmt.Errorf("cpu hog: pin to CPU %d: %w", c, err)
				return
			}
			started.Add(1)
			x := uint64(1)
			for stop.Load() == 0 {
				for range 1 << 16 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			if x == 0 {
				fmt.Fprintln(io.Discard, x) // keeps the loop from being removed
			}
		}()
	}
	for started.Load() < int32(len(cpus)) {
		select {
		case err := <-errc:
			fmt.Fprintln(os.Stderr, err)
			return 3
		case <-time.After(time.Millisecond):
		}
	}
	fmt.Fprintln(out, "ready")
	io.Copy(io.Discard, br)
	stop.Store(1)
	return 0
}

// CPUHog is a process with one busy thread pinned to each of a set of CPUs:
// another app that wants those cores.
type CPUHog struct {
	CPUs  []int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	err   error
}

// StartCPUHog starts a process spinning one thread on each of cpus (in cg
// when it is not nil) and returns once every thread spins. Cancelling ctx
// kills it; it also dies with its parent.
func StartCPUHog(ctx context.Context, cpus []int, cg *Cgroup) (*CPUHog, error) {
	if len(cpus) == 0 || len(cpus) > 1024 {
		return nil, fmt.Errorf("pressure: cpu hog with %d threads", len(cpus))
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("pressure: cpu hog: %w", err)
	}
	list := make([]string, len(cpus))
	for i, c := range cpus {
		list[i] = strconv.Itoa(c)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), cpuHogEnv+"="+strings.Join(list, ","), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if cg != nil {
		err = cg.Start(cmd)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		stdin.Close()
		return nil, fmt.Errorf("pressure: start cpu hog: %w", err)
	}
	h := &CPUHog{CPUs: cpus, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line == "ready\n"
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case h.err = <-exited:
		case <-ctx.Done():
			cmd.Process.Kill()
			h.err = <-exited
		}
		close(h.done)
	}()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		h.Stop()
		return nil, fmt.Errorf("pressure: cpu hog: %w", err)
	}
	if !<-ready {
		h.Stop()
		return nil, fmt.Errorf("pressure: cpu hog on CPUs %v did not start its threads (%v)", cpus, h.err)
	}
	return h, nil
}

// Pid is the hog's process id.
func (h *CPUHog) Pid() int { return h.cmd.Process.Pid }

// CPUTime is the CPU time the hog has used so far (all its threads), read
// from /proc in nanoseconds (each task's schedstat: a hog's threads live as
// long as it does), else in clock ticks (ProcessCPUTime), so that a phase of
// a few milliseconds on a fast machine still shows the hog's time.
func (h *CPUHog) CPUTime() (time.Duration, error) {
	if t, err := tasksSchedCPU(h.Pid()); err == nil {
		return t, nil
	}
	return ProcessCPUTime(h.Pid())
}

// tasksSchedCPU sums the run time of process pid's live tasks, the first
// field of /proc/PID/task/TID/schedstat (nanoseconds).
func tasksSchedCPU(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, fmt.Errorf("pressure: %s/%s/schedstat: empty", dir, e.Name())
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("pressure: %s/%s/schedstat: %w", dir, e.Name(), err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// Stop ends the hog (its stdin closes; killed after 5 s) and returns its
// exit error, nil when it exited cleanly.
func (h *CPUHog) Stop() error {
	h.stdin.Close()
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		h.cmd.Process.Kill()
		<-h.done
	}
	return h.err
}

// userHZ is the kernel's USER_HZ, the unit of /proc/PID/stat's CPU times,
// from the auxiliary vector (AT_CLKTCK; 100 when it is missing).
var userHZ = func() uint64 {
	const atClkTck = 17
	if auxv, err := unix.Auxv(); err == nil {
		for _, kv := range auxv {
			if kv[0] == atClkTck && kv[1] > 0 {
				return uint64(kv[1])
			}
		}
	}
	return 100
}()

// ProcessCPUTime is pid's user + system CPU time (all threads, also exited
// ones) from /proc/PID/stat, at 1/USER_HZ resolution.
func ProcessCPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	ticks, ok := cputime.StatTicks(b)
	if !ok {
		return 0, fmt.Errorf("pressure: /proc/%d/stat: no utime and stime (fields 14-15) in %q", pid, b)
	}
	return time.Duration(ticks) * time.Second / time.Duration(userHZ), nil
}
