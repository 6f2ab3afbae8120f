//go:build linux

package pressure

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCPUHogSpins: a CPU hog pinned to one allowed CPU burns CPU time while
// it runs (at least a tenth of the wall time even on a loaded machine: it
// is one runnable thread among the CPU's others) and stops when asked.
func TestCPUHogSpins(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for c := 0; c < 1024 && cpu < 0; c++ {
		if set.IsSet(c) {
			cpu = c
		}
	}
	h, err := StartCPUHog(context.Background(), []int{cpu}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c0, err := h.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(500 * time.Millisecond)
	c1, err := h.CPUTime()
	wall := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	// The nanosecond reading and the tick one agree to the tick reading's
	// resolution (2 ticks: utime and stime each truncated) plus what the
	// hog ran between the two reads (bounded by the wall time between them).
	p0 := time.Now()
	ns, errNS := tasksSchedCPU(h.Pid())
	ticks, errT := ProcessCPUTime(h.Pid())
	between := time.Since(p0)
	if errNS == nil && errT == nil {
		tick := time.Second / time.Duration(userHZ)
		if d := ns - ticks; d < -between || d > 2*tick+between {
			t.Errorf("schedstat %v against /proc/PID/stat %v: off by more than 2 ticks", ns, ticks)
		}
	} else {
		t.Logf("schedstat %v, stat %v: not compared", errNS, errT)
	}
	t.Logf("hog on CPU %d: %v CPU in %v wall", cpu, c1-c0, wall)
	if c1-c0 < wall/10 {
		t.Errorf("hog used %v CPU in %v: not spinning", c1-c0, wall)
	}
	if _, err := StartCPUHog(context.Background(), []int{1023}, nil); err == nil {
		t.Errorf("a hog pinned to CPU 1023 started")
	}
}
