package native

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sample"
)

// pinnedTasks counts this process's threads whose CPU affinity is exactly
// the list want ("0", "1", ...).
func pinnedTasks(t *testing.T, want string) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) == want {
				n++
			}
		}
	}
	return n
}

// TestSpecThreadMasks: the draft pool's and the verify pool's worker
// threads run on the CPUs of their masks (read back from
// /proc/self/task/*/status), and go away when the pools are released.
func TestSpecThreadMasks(t *testing.T) {
	cpus := allowedCPUs(t)
	a, b := cpus[0], cpus[len(cpus)-1]
	e := loadSpecTarget(t)
	s, err := e.newSession(engine.SessionConfig{NCtx: 128, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp, err := NewSpeculator(s, DraftSpec{Kind: DraftSkip, N: 3}, sample.Params{TopP: 1, RepeatPenalty: 1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	la, lb := itoa(a), itoa(b)
	baseA, baseB := pinnedTasks(t, la), pinnedTasks(t, lb)
	if err := sp.SetDraftThreads(2, 1<<a); err != nil {
		t.Fatal(err)
	}
	if err := sp.SetVerifyCPUMask(1 << b); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Start(specPrompt(t, e)); err != nil {
		t.Fatal(err)
	}
	for range 2 { // two threads on one CPU wait for each other: keep it short
		if _, err := sp.Step(); err != nil {
			t.Fatal(err)
		}
	}
	// 2 draft threads: 1 worker on CPU a; 2 verify threads: 1 worker on b.
	wantA, wantB := baseA+1, baseB+1
	if a == b {
		wantA, wantB = baseA+2, baseA+2
	}
	if n := pinnedTasks(t, la); n < wantA {
		t.Errorf("%d threads pinned to CPU %d, want ≥ %d (draft pool)", n, a, wantA)
	}
	if n := pinnedTasks(t, lb); n < wantB {
		t.Errorf("%d threads pinned to CPU %d, want ≥ %d (verify pool)", n, b, wantB)
	}
	if th, m := sp.DraftThreads(); th != 2 || m != 1<<a {
		t.Errorf("DraftThreads = %d, %#x", th, m)
	}
	if err := sp.SetDraftThreads(0, 0); err != nil {
		t.Fatal(err)
	}
	if err := sp.SetVerifyCPUMask(0); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Step(); err != nil {
		t.Fatal(err)
	}
	// The workers are gone; ggml may leave its mask on the calling thread
	// (it applies worker 0's mask to the thread that computes), hence + 1.
	if n := pinnedTasks(t, la); a != b && n > baseA+1 {
		t.Errorf("%d threads still pinned to CPU %d after the draft pool was released (had %d)", n, a, baseA)
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
		if !ok {
			continue
		}
		var out []int
		for _, part := range strings.Split(strings.TrimSpace(v), ",") {
			lo, hi := part, part
			if i := strings.IndexByte(part, '-'); i >= 0 {
				lo, hi = part[:i], part[i+1:]
			}
			var l, h int
			for _, c := range lo {
				l = l*10 + int(c-'0')
			}
			for _, c := range hi {
				h = h*10 + int(c-'0')
			}
			for c := l; c <= h && c < 64; c++ {
				out = append(out, c)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	t.Skip("no Cpus_allowed_list")
	return nil
}
