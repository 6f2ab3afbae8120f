package cputime

import (
	"runtime"
	"testing"
	"time"
)

// TestThread checks that Thread is this thread's CPU clock, whatever the
// machine's load: it advances while the thread computes (the busy loop runs
// until the clock has counted 20 ms, which a stuck clock never does within
// the generous wall bound), and it does not advance while the thread sleeps,
// even when another thread of the process is busy meanwhile (a process-wide
// clock would).
func TestThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const want, bound = 20 * time.Millisecond, 30 * time.Second
	c0, w0 := Thread(), time.Now()
	for Thread()-c0 < want {
		if time.Since(w0) > bound {
			t.Fatalf("the thread clock counted %v of CPU in %v of busy wall time", Thread()-c0, bound)
		}
	}
	busy, wall := Thread()-c0, time.Since(w0)
	if busy > wall+time.Millisecond {
		t.Fatalf("thread CPU %v exceeds the wall time %v it took", busy, wall)
	}

	stop := make(chan struct{})
	spun := make(chan struct{})
	go func() { // another thread of this process, busy while this one sleeps
		runtime.LockOSThread()
		defer close(spun)
		for {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	c1, p1 := Thread(), Process()
	time.Sleep(50 * time.Millisecond)
	idle, proc := Thread()-c1, Process()-p1
	close(stop)
	<-spun
	t.Logf("busy: %v CPU in %v; sleep 50 ms: this thread %v CPU, the process %v", busy, wall, idle, proc)
	if idle > 5*time.Millisecond {
		t.Fatalf("a sleeping thread's clock counted %v (the process counted %v)", idle, proc)
	}
}
