//go:build !linux || !cgo

package policy

import "time"

// threadClock is unavailable off Linux and without cgo (naming another
// thread's clock would cost a gettid system call per decide): the deadline
// is wall time with the late-timer grace (deadline.go).
type threadClock struct{ ok bool }

func startThreadClock() threadClock { return threadClock{} }

func (threadClock) read() (time.Duration, bool) { return 0, false }
