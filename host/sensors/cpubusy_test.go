package sensors

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/cputime"
	"golang.org/x/sys/unix"
)

func TestParseProcStat(t *testing.T) {
	const stat = "cpu  300 3 30 900 9 0 3 6 0 0\n" +
		"cpu0 100 1 10 400 4 0 1 2 0 0\n" +
		"cpu1 200 2 20 500 5 0 2 4 0 0\n" +
		"intr 12345 0 0\nctxt 999\n"
	tests := []struct {
		name string
		in   string
		mask [2]uint64
		busy uint64
		ok   bool
	}{
		{"both", stat, [2]uint64{3, 0}, 100 + 1 + 10 + 0 + 1 + 2 + 200 + 2 + 20 + 0 + 2 + 4, true},
		{"cpu1 only", stat, [2]uint64{2, 0}, 200 + 2 + 20 + 2 + 4, true},
		{"cpu2 missing", stat, [2]uint64{4, 0}, 0, false},
		{"no mask", stat, [2]uint64{}, 0, false},
		{"old kernel, four fields", "cpu0 10 0 5 100\n", [2]uint64{1, 0}, 15, true},
		{"three fields", "cpu0 10 0 5\n", [2]uint64{1, 0}, 0, false},
		{"negative", "cpu0 10 0 -5 100\n", [2]uint64{1, 0}, 0, false},
		{"garbage id", "cpuX 10 0 5 100\n", [2]uint64{1, 0}, 0, false},
		{"empty", "", [2]uint64{1, 0}, 0, false},
		{"cpu 64", "cpu64 7 0 1 50 0 0 0 0\n", [2]uint64{0, 1}, 8, true},
	}
	for _, tc := range tests {
		busy, ok := parseProcStat([]byte(tc.in), tc.mask)
		if ok != tc.ok || (ok && busy != tc.busy) {
			t.Errorf("%s: parseProcStat = %d %v, want %d %v", tc.name, busy, ok, tc.busy, tc.ok)
		}
	}
}

func FuzzProcStat(f *testing.F) {
	seeds(f, "/proc/stat")
	f.Add([]byte("cpu  1 2 3 4\ncpu0 1 2 3 4 5 6 7 8\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range [][2]uint64{{1, 0}, {3, 0}, {^uint64(0), ^uint64(0)}} {
			if busy, ok := parseProcStat(b, m); !ok && busy != 0 {
				t.Fatalf("parseProcStat(%q) = %d, not ok", b, busy)
			}
		}
	})
}

// cpuBusySpan's arithmetic: other = (busy ticks / USER_HZ − own CPU) ÷ span,
// never negative; PSI some over the span in percent.
func TestCPUBusySpan(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := cpuSample{ok: true, t: t0, mask: [2]uint64{3, 0}, busy: 1000, self: 2 * time.Second, psi: 5_000_000, psiOK: true}
	b := a
	b.t = t0.Add(500 * time.Millisecond)
	b.busy = 1000 + 90                     // 0.9 s of CPU on the two CPUs
	b.self = a.self + 400*time.Millisecond // 0.4 s of it ours
	b.psi = a.psi + 250_000                // 0.25 s with a task waiting
	c, ok := cpuBusySpan(&a, &b)
	if !ok || !c.Present || c.Span != 500*time.Millisecond || math.Abs(c.OtherBusy-1.0) > 1e-9 || !c.PSIPresent || math.Abs(c.PSISomeRecent-50) > 1e-9 {
		t.Fatalf("span = %+v, %v; want 1.0 cores other, 50%% PSI over 500ms", c, ok)
	}
	b.self = a.self + 950*time.Millisecond // our CPU read more precisely than the ticks
	if c, _ := cpuBusySpan(&a, &b); c.OtherBusy != 0 {
		t.Errorf("negative other busy not clamped: %v", c.OtherBusy)
	}
	for name, mod := range map[string]func(*cpuSample){
		"CPUs changed": func(s *cpuSample) { s.mask = [2]uint64{1, 0} },
		"counter back": func(s *cpuSample) { s.busy = 10 },
		"no time":      func(s *cpuSample) { s.t = t0 },
		"end not read": func(s *cpuSample) { s.ok = false },
	} {
		e := b
		mod(&e)
		if c, ok := cpuBusySpan(&a, &e); ok || c.Present {
			t.Errorf("%s: span %+v computed", name, c)
		}
	}
	e := b
	e.psiOK = false
	if c, ok := cpuBusySpan(&a, &e); !ok || c.PSIPresent {
		t.Errorf("without PSI at one end: %+v %v", c, ok)
	}
}

// A Reader over fake /proc files (WithPID, so "this process" is a fake
// stat too): the first reading starts a span, a reading within MinCPUSpan
// repeats the previous values, the next one after it closes the span.
func TestReaderCPUBusy(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	must := func(p, s string) { writeUnder(t, root, p, s) }
	// Every allowed CPU at busy ticks b (user field), the process at ticks p,
	// PSI some total us.
	write := func(b, p, us int) {
		var sb strings.Builder
		sb.WriteString("cpu  0 0 0 0 0 0 0 0 0 0\n")
		for c := range 1024 {
			if set.IsSet(c) {
				fmt.Fprintf(&sb, "cpu%d %d 0 0 1000 0 0 0 0 0 0\n", c, b)
			}
		}
		must("proc/stat", sb.String())
		must("proc/77/stat", fmt.Sprintf("77 (engine) S 1 77 77 0 -1 0 0 0 0 0 %d 0 0 0 20 0 3 0 1 1 1\n", p))
		must("proc/pressure/cpu", fmt.Sprintf("some avg10=0.00 avg60=0.00 avg300=0.00 total=%d\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", us))
	}
	write(100, 10, 1000)
	r, err := NewReader(WithRoot(root), WithPID(77), WithSources(SourceCPULoad), WithCPULoadInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var s Snapshot
	r.Read(&s)
	if s.CPUBusy.Present {
		t.Fatalf("first reading has a span: %+v", s.CPUBusy)
	}
	t0 := s.Time
	n := set.Count()
	write(100+30, 10+20, 1000+100_000) // each CPU 0.3 s busy, 0.2 s of it ours
	r.Read(&s)
	if s.CPUBusy.Present {
		t.Fatalf("a reading within MinCPUSpan closed a span: %+v", s.CPUBusy)
	}
	time.Sleep(MinCPUSpan - time.Since(t0) + 10*time.Millisecond)
	r.Read(&s)
	c := s.CPUBusy
	sec := c.Span.Seconds()
	want := (float64(n)*0.3 - 0.2) / sec
	if !c.Present || c.Span < MinCPUSpan || math.Abs(c.OtherBusy-want) > 1e-6 || !c.PSIPresent || math.Abs(c.PSISomeRecent-10/sec) > 1e-6 {
		t.Fatalf("span %+v; want other %.4f cores, PSI %.3f%%", c, want, 10/sec)
	}
	var d abi.Sensors
	s.Fill(&d)
	if !d.Has(abi.PresentCPUBusy) || math.Abs(float64(d.CPUOtherBusy)-want) > 1e-5 || math.Abs(float64(d.CPUSpanMS)-sec*1000) > 1e-3 {
		t.Fatalf("abi: present %v, other %v, span %v ms", d.Has(abi.PresentCPUBusy), d.CPUOtherBusy, d.CPUSpanMS)
	}
	// Within MinCPUSpan of that: the same values again.
	r.Read(&s)
	if s.CPUBusy != c {
		t.Fatalf("repeat %+v, want %+v", s.CPUBusy, c)
	}
	// No CPU PSI: present, recent PSI -1 in the ABI.
	if err := os.Remove(filepath.Join(root, "proc/pressure/cpu")); err != nil {
		t.Fatal(err)
	}
	s.CPUBusy.PSIPresent = false
	var e abi.Sensors
	s.Fill(&e)
	if !e.Has(abi.PresentCPUBusy) || e.CPUPSISomeRecent != -1 {
		t.Fatalf("without PSI: present %v, recent %v", e.Has(abi.PresentCPUBusy), e.CPUPSISomeRecent)
	}
}

// On the live machine: a busy child process counts as other load. Other
// load is the child's CPU plus whatever else the machine ran, so the
// reading is at least the child's CPU over the span (read from its
// /proc/PID/stat at both ends), less the resolution: ±2 ticks per CPU of
// /proc/stat and ±1 tick of the child's own reading at each end.
func TestReaderCPUBusyLive(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	r, err := NewReader(WithSources(SourceCPULoad), WithCPULoadInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	childTicks := func() uint64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		v, ok := cputime.StatTicks(b)
		if !ok {
			t.Fatalf("child stat %q", b)
		}
		return v
	}
	var s Snapshot
	r.Read(&s)
	c0 := childTicks()
	time.Sleep(400 * time.Millisecond)
	r.Read(&s)
	c1 := childTicks()
	c := s.CPUBusy
	if !c.Present {
		t.Fatal("no span")
	}
	sec := c.Span.Seconds()
	tick := cputime.TaskTick.Seconds()
	child := float64(c1-c0) * tick / sec
	res := (2*float64(s.Allowed.N) + 2) * tick / sec
	t.Logf("busy child: other %.2f cores over %v; the child alone %.2f cores (resolution %.2f)", c.OtherBusy, c.Span, child, res)
	if c.OtherBusy < child-res {
		t.Errorf("other load %.2f cores < the busy child's %.2f − %.2f", c.OtherBusy, child, res)
	}
	if child < 0.1 {
		t.Logf("the child barely ran (%.2f cores): a loaded machine; the check above is weak", child)
	}
}
