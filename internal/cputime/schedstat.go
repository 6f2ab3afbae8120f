package cputime

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TaskRun is one thread's time on a CPU between two TasksPrecise readings.
type TaskRun struct {
	TID int
	CPU time.Duration
	// State is where the thread was at the second reading: the syscall it
	// waits in by name where known ("nanosleep" is how Go's sysmon sleeps,
	// "futex" an idle runtime or pool thread), else the number, or
	// "running".
	State string
}

// TasksPrecise reads each thread's time on a CPU from
// /proc/self/task/*/schedstat (nanoseconds, unlike Tasks' ticks), keyed by
// thread id. Threads that exit during the listing are skipped.
func TasksPrecise() (map[int]time.Duration, error) {
	ps, err := filepath.Glob("/proc/self/task/*/schedstat")
	if err != nil || len(ps) == 0 {
		return nil, fmt.Errorf("cputime: no /proc/self/task/*/schedstat")
	}
	out := make(map[int]time.Duration, len(ps))
	for _, p := range ps {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		tid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return nil, fmt.Errorf("cputime: %s: empty", p)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || ns < 0 {
			return nil, fmt.Errorf("cputime: %s: malformed %q", p, trunc(string(b)))
		}
		out[tid] = time.Duration(ns)
	}
	return out, nil
}

// Runs lists the threads' CPU time between two TasksPrecise readings, the
// busiest first, with each thread's state now.
func Runs(before, after map[int]time.Duration) []TaskRun {
	var rs []TaskRun
	for tid, a := range after {
		rs = append(rs, TaskRun{TID: tid, CPU: a - before[tid], State: taskState(tid)})
	}
	slices.SortFunc(rs, func(a, b TaskRun) int { return int(b.CPU - a.CPU) })
	return rs
}

// syscallNames names the syscalls an idle Go or ggml thread waits in, by
// architecture.
var syscallNames = map[string]map[string]string{
	"amd64": {"35": "nanosleep", "202": "futex", "230": "clock_nanosleep", "232": "epoll_wait", "281": "epoll_pwait"},
	"arm64": {"98": "futex", "101": "nanosleep", "115": "clock_nanosleep", "22": "epoll_pwait"},
}

func taskState(tid int) string {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/syscall")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	if n, ok := syscallNames[runtime.GOARCH][f[0]]; ok {
		return n
	}
	return f[0]
}
