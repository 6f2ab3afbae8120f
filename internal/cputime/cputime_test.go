package cputime

import (
	"runtime"
	"testing"
	"time"
)

// A busy loop uses CPU time; sleeping does not.
func TestThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := Thread()
	for t0 := time.Now(); time.Since(t0) < 20*time.Millisecond; {
	}
	busy := Thread() - c0
	c1 := Thread()
	time.Sleep(20 * time.Millisecond)
	idle := Thread() - c1
	t.Logf("busy 20 ms: %v CPU; sleep 20 ms: %v CPU", busy, idle)
	if busy < 5*time.Millisecond || idle > 5*time.Millisecond {
		t.Fatalf("busy %v, idle %v", busy, idle)
	}
}
