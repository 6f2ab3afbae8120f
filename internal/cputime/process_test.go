package cputime

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseTaskStat(t *testing.T) {
	tests := []struct {
		name, line string
		tid        int
		cpu        time.Duration
		bad        bool
	}{
		{"plain", "1234 (edgellm) R 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 1 0", 1234, 2 * time.Second, false},
		{"name with spaces and parens", "7 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 1 2 0 0", 7, 30 * time.Millisecond, false},
		{"short", "7 (a) S 1 2 3", 0, 0, true},
		{"no name", "7 S 1 2 3 4 5 6 7 8 9 10 11 12 13", 0, 0, true},
		{"negative", "7 (a) S 1 2 3 4 5 6 7 8 9 10 -1 2 0 0", 0, 0, true},
		{"bad tid", "x (a) S 1 2 3 4 5 6 7 8 9 10 1 2 0 0", 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tid, cpu, err := parseTaskStat(tc.line)
			if tc.bad {
				if err == nil {
					t.Fatalf("parsed %q as tid %d cpu %v", tc.line, tid, cpu)
				}
				return
			}
			if err != nil || tid != tc.tid || cpu != tc.cpu {
				t.Fatalf("got %d %v %v, want %d %v", tid, cpu, err, tc.tid, tc.cpu)
			}
		})
	}
}

// StatTicks: utime 25 + stime 17; a name with spaces and ')'; what it
// refuses; and that it does not allocate (host/sensors reads it every
// 200 ms for a WithPID Reader).
func TestStatTicks(t *testing.T) {
	line := []byte("4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 25 17 0 0 20 0 3 0 1000 1000 100\n")
	if v, ok := StatTicks(line); !ok || v != 42 {
		t.Fatalf("StatTicks = %d %v, want 42", v, ok)
	}
	for _, bad := range []string{"", "4242 no paren S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 -25 17",
		"4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 99999999999999999999 17"} {
		if v, ok := StatTicks([]byte(bad)); ok {
			t.Errorf("StatTicks(%q) = %d, ok", bad, v)
		}
	}
	if n := testing.AllocsPerRun(100, func() { StatTicks(line) }); n != 0 {
		t.Errorf("StatTicks allocates %v times", n)
	}
}

func FuzzParseTaskStat(f *testing.F) {
	f.Add("1234 (edgellm) R 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 1 0")
	f.Add("7 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 1 2 0 0")
	f.Fuzz(func(t *testing.T, line string) {
		tid, cpu, err := parseTaskStat(line)
		if err == nil && (cpu < 0 || !strings.Contains(line, ")")) {
			t.Fatalf("accepted %q: tid %d cpu %v", line, tid, cpu)
		}
	})
}

// One spinning goroutine on a locked thread: the process's CPU time grows by
// about the wall time and /proc/self/task shows one busy thread. The bounds
// are loose on purpose (another job may keep the spinner off the CPU): the
// spinner must get some CPU (≥ 1 tick), and the process cannot get more than
// its threads × wall.
func TestProcessAndTasks(t *testing.T) {
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for !stop.Load() {
		}
		close(done)
	}()
	time.Sleep(10 * time.Millisecond) // let it start
	t0, p0 := time.Now(), Process()
	k0, err := Tasks()
	if err != nil {
		t.Skip(err)
	}
	time.Sleep(300 * time.Millisecond)
	k1, _ := Tasks()
	p1, wall := Process(), time.Since(t0)
	stop.Store(true)
	<-done
	cpu := p1 - p0
	var sum time.Duration
	for tid, d := range k1 {
		sum += d - k0[tid]
	}
	t.Logf("wall %v, process CPU %v, tasks CPU %v, busy threads (≥ 10%% of wall) %d", wall, cpu, sum, Busy(k0, k1, wall, 0.1))
	if cpu < TaskTick || sum < TaskTick {
		t.Fatalf("a spinning thread used %v (rusage) / %v (tasks) CPU in %v", cpu, sum, wall)
	}
	if float64(cpu) > float64(runtime.NumCPU())*float64(wall)*1.05 {
		t.Fatalf("process CPU %v > %d CPUs × wall %v", cpu, runtime.NumCPU(), wall)
	}
}
