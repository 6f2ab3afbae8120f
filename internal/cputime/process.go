package cputime

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Process is the CPU time (user + system) of every thread of this process so
// far, from getrusage(RUSAGE_SELF): helpers that spin or wait busily count
// here, unlike in Thread. 0 where unavailable.
func Process() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// userHZ is the unit of /proc/<pid>/stat times (USER_HZ): 100 on every Linux
// ABI the project builds for.
const userHZ = 100

// TaskTick is the resolution of Tasks' readings.
const TaskTick = time.Second / userHZ

// Tasks reads the CPU time of each thread of this process from
// /proc/self/task/*/stat, keyed by thread id, in TaskTick resolution. Threads
// that exit between the directory listing and the read are skipped.
func Tasks() (map[int]time.Duration, error) {
	dirs, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil || len(dirs) == 0 {
		return nil, fmt.Errorf("cputime: no /proc/self/task/*/stat")
	}
	out := make(map[int]time.Duration, len(dirs))
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		tid, d, err := parseTaskStat(string(b))
		if err != nil {
			return nil, fmt.Errorf("cputime: %s: %w", p, err)
		}
		out[tid] = d
	}
	return out, nil
}

// parseTaskStat reads the thread id and utime+stime (fields 1, 14 and 15 of
// proc(5)'s stat) from one stat line. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseTaskStat(line string) (tid int, cpu time.Duration, err error) {
	sp := strings.IndexByte(line, ' ')
	rp := strings.LastIndexByte(line, ')')
	if sp <= 0 || rp < sp {
		return 0, 0, fmt.Errorf("malformed stat line %q", trunc(line))
	}
	if tid, err = strconv.Atoi(line[:sp]); err != nil {
		return 0, 0, fmt.Errorf("malformed thread id in %q", trunc(line))
	}
	f := strings.Fields(line[rp+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("stat line with %d fields after the name, want ≥ 13: %q", len(f), trunc(line))
	}
	var ticks int64
	for _, s := range f[11:13] { // fields 14 (utime) and 15 (stime)
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, 0, fmt.Errorf("malformed CPU time %q", s)
		}
		ticks += v
	}
	return tid, time.Duration(ticks) * TaskTick, nil
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Busy counts the threads whose CPU time grew by at least frac × wall between
// two Tasks readings: the threads that ran, rather than slept, over an
// interval.
func Busy(before, after map[int]time.Duration, wall time.Duration, frac float64) int {
	n := 0
	for tid, a := range after {
		if float64(a-before[tid]) >= frac*float64(wall) {
			n++
		}
	}
	return n
}
