//go:build linux

package pressure

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// The hog is this same executable re-executed with hogEnv set: its main
// (or TestMain) dispatches HogMode, which runs the hog instead of the
// program (see RATIONALE.md).
const (
	hogEnv     = "EDGELLM_PRESSURE_HOG_MB"
	hogHoldEnv = "EDGELLM_PRESSURE_HOG_HOLD_MS"
)

// HogMode runs this process as a memory hog when StartHog started it as one
// (hogEnv is set) and returns its exit code and true; otherwise it returns
// false at once. A program that starts hogs dispatches it first thing in
// main (cmd/edgellm's main.go), a test binary in TestMain.
func HogMode() (code int, ok bool) {
	if code, ok := cpuHogMode(); ok {
		return code, true
	}
	v, ok := os.LookupEnv(hogEnv)
	if !ok {
		return 0, false
	}
	return hogMain(v, os.Getenv(hogHoldEnv), os.Stdin, os.Stdout), true
}

// hogMain is the hog process: wait for "go" on stdin (the parent has put it
// in its cgroup), map and touch mb MiB of anonymous memory, say "ready", and
// hold it until stdin closes or hold ms pass.
func hogMain(mbStr, holdStr string, in io.Reader, out io.Writer) int {
	mb, err := strconv.Atoi(mbStr)
	if err != nil || mb <= 0 {
		fmt.Fprintf(os.Stderr, "hog: bad %s=%q\n", hogEnv, mbStr)
		return 2
	}
	hold, _ := strconv.Atoi(holdStr)
	br := bufio.NewReader(in)
	if line, err := br.ReadString('\n'); err != nil || line != "go\n" {
		return 0 // the parent went away before the go-ahead
	}
	mem, err := syscall.Mmap(-1, 0, mb<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hog: mmap %d MiB: %v\n", mb, err)
		return 3
	}
	page := os.Getpagesize()
	for i := 0; i < len(mem); i += page {
		mem[i] = 1 // fault every page in: it is now resident and charged
	}
	fmt.Fprintln(out, "ready")
	eof := make(chan struct{})
	go func() { io.Copy(io.Discard, br); close(eof) }()
	var timeout <-chan time.Time
	if hold > 0 {
		timeout = time.After(time.Duration(hold) * time.Millisecond)
	}
	select {
	case <-eof:
	case <-timeout:
	}
	mem[0] = 2 // keep the mapping alive until here
	return 0
}

// HogOptions configure StartHog.
type HogOptions struct {
	// Cgroup, when set, is where the hog runs: it competes with the engine
	// for the cgroup's memory limit, like a background app for the device's.
	Cgroup *Cgroup
	// Hold is how long the hog keeps its memory (0: until Stop or ctx ends).
	Hold time.Duration
	// Stderr receives the hog's diagnostics (nil: discarded).
	Stderr io.Writer
}

// HogResult is how a hog ended.
type HogResult struct {
	MB    int
	Ready bool // it had touched all its memory
	// Killed is set when a signal ended it; Signal says which. SIGKILL from
	// the cgroup's OOM killer shows here: confirm with the cgroup's
	// Events().OOMKill.
	Killed   bool
	Signal   syscall.Signal
	ExitCode int
	Err      error // could not start or wait
}

func (r HogResult) String() string {
	switch {
	case r.Err != nil:
		return fmt.Sprintf("hog %d MiB: %v", r.MB, r.Err)
	case r.Killed:
		return fmt.Sprintf("hog %d MiB killed by signal %d (%v) (ready %v)", r.MB, int(r.Signal), r.Signal, r.Ready)
	}
	return fmt.Sprintf("hog %d MiB exited %d (ready %v)", r.MB, r.ExitCode, r.Ready)
}

// Hog is a process that holds a given amount of memory: a background app.
type Hog struct {
	MB        int
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	done      chan struct{}
	readyc    chan struct{} // closed when the hog said "ready"
	readyFlag atomic.Bool
	result    HogResult
}

// StartHog starts a process that takes mb MiB (mapped and touched) and
// returns once the memory is resident or the process has died (an OOM kill
// while allocating: see Wait). Cancelling ctx kills the hog. The hog also
// dies with its parent (PR_SET_PDEATHSIG, and its stdin closes).
func StartHog(ctx context.Context, mb int, opts HogOptions) (*Hog, error) {
	if mb <= 0 || mb > 1<<20 {
		return nil, fmt.Errorf("pressure: hog size %d MiB out of range", mb)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("pressure: hog: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), hogEnv+"="+strconv.Itoa(mb), hogHoldEnv+"="+strconv.FormatInt(opts.Hold.Milliseconds(), 10),
		"GORACE=atexit_sleep_ms=0") // a -race build otherwise sleeps 1 s at exit
	cmd.Stderr = opts.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Our own pipe for stdout, read to EOF before the result is final (the
	// "ready" line of a hog killed right after it is not lost).
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = outW
	if opts.Cgroup != nil {
		err = opts.Cgroup.Start(cmd)
	} else {
		err = cmd.Start()
	}
	outW.Close()
	if err != nil {
		outR.Close()
		stdin.Close()
		return nil, fmt.Errorf("pressure: start hog: %w", err)
	}
	h := &Hog{MB: mb, cmd: cmd, stdin: stdin, done: make(chan struct{}), readyc: make(chan struct{})}
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		defer outR.Close()
		line, _ := bufio.NewReader(outR).ReadString('\n')
		if line == "ready\n" {
			h.readyFlag.Store(true)
			close(h.readyc)
		}
		io.Copy(io.Discard, outR)
	}()
	go h.wait(ctx, outDone)
	if _, err := io.WriteString(stdin, "go\n"); err == nil {
		select {
		case <-h.readyc:
		case <-h.done:
		}
	}
	return h, nil
}

func (h *Hog) wait(ctx context.Context, outDone <-chan struct{}) {
	exited := make(chan error, 1)
	go func() { exited <- h.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-ctx.Done():
		h.cmd.Process.Kill()
		err = <-exited
	}
	<-outDone
	r := HogResult{MB: h.MB, Ready: h.readyFlag.Load()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Killed, r.Signal = true, ws.Signal()
		} else {
			r.ExitCode = ee.ExitCode()
		}
	default:
		r.Err = err
	}
	h.result = r
	close(h.done)
}

// Pid is the hog's process id.
func (h *Hog) Pid() int { return h.cmd.Process.Pid }

// Ready reports whether the hog had all its memory resident when StartHog
// returned.
func (h *Hog) Ready() bool { return h.readyFlag.Load() }

// Done is closed when the hog has exited.
func (h *Hog) Done() <-chan struct{} { return h.done }

// Wait waits for the hog to exit and says how.
func (h *Hog) Wait() HogResult {
	<-h.done
	return h.result
}

// Stop asks the hog to free its memory and exit (its stdin closes), kills it
// if it has not within 5 seconds, and returns how it ended.
func (h *Hog) Stop() HogResult {
	h.stdin.Close()
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		h.cmd.Process.Kill()
		<-h.done
	}
	return h.result
}
