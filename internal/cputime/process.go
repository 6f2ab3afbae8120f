package cputime

import (
	"bytes"
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

// maxTicks bounds one CPU time field (about 87 years at 100 Hz), so that
// the sum of two converted to a time.Duration cannot overflow.
const maxTicks = 1 << 38

// StatTicks reads utime + stime (fields 14 and 15 of proc(5)'s stat, in
// 1/USER_HZ ticks: TaskTick here) from a /proc/PID/stat or
// /proc/PID/task/TID/stat line without allocating, for readers that run
// often (host/sensors) as well as for Tasks. The command name (field 2) is
// in parentheses and may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func StatTicks(line []byte) (uint64, bool) {
	end := bytes.LastIndexByte(line, ')')
	if end < 0 {
		return 0, false
	}
	rest := line[end+1:]
	var sum uint64
	for field := 3; field <= 15; field++ { // field 3 (state) is the first after ')'
		for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\n') {
			rest = rest[1:]
		}
		n := bytes.IndexAny(rest, " \n")
		if n < 0 {
			n = len(rest)
		}
		f := rest[:n]
		rest = rest[n:]
		if len(f) == 0 {
			return 0, false
		}
		if field < 14 {
			continue
		}
		v, err := strconv.ParseUint(string(f), 10, 64) // no allocation: the conversion does not escape
		if err != nil || v > maxTicks {
			return 0, false
		}
		sum += v
	}
	return sum, true
}

// parseTaskStat reads the thread id and utime+stime (fields 1, 14 and 15 of
// proc(5)'s stat) from one stat line, the times with StatTicks.
func parseTaskStat(line string) (tid int, cpu time.Duration, err error) {
	sp := strings.IndexByte(line, ' ')
	if sp <= 0 {
		return 0, 0, fmt.Errorf("malformed stat line %q", trunc(line))
	}
	if tid, err = strconv.Atoi(line[:sp]); err != nil {
		return 0, 0, fmt.Errorf("malformed thread id in %q", trunc(line))
	}
	ticks, ok := StatTicks([]byte(line))
	if !ok {
		return 0, 0, fmt.Errorf("malformed stat line (name, or utime and stime, fields 14-15) %q", trunc(line))
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
