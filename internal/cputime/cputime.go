// Package cputime reads the calling OS thread's CPU time: the measure that
// engine comparisons use on a shared machine, where wall time also counts the
// time other jobs kept the thread off the CPU.
package cputime

import (
	"time"

	"golang.org/x/sys/unix"
)

// Thread is the calling OS thread's CPU time (0 where unavailable). The
// caller must keep its goroutine on one thread (runtime.LockOSThread) between
// two readings. It is a system call, not a vDSO read: keep it off paths that
// run per token unless measuring.
func Thread() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
