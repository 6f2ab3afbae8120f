package sensors

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
)

func TestParseLoadavg(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Runnable
	}{
		{"idle", "0.00 0.01 0.05 1/123 4567\n", Runnable{true, 1, 123, 0}},
		{"loaded", "19.45 16.45 9.30 21/812 26769\n", Runnable{true, 21, 812, 19.45}},
		{"no slash", "1.0 1.0 1.0 3 1\n", Runnable{}},
		{"running > total", "1.0 1.0 1.0 9/3 1\n", Runnable{}},
		{"empty", "", Runnable{}},
		{"garbage", "x y z 1/2\n", Runnable{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Runnable
			parseLoadavg([]byte(tc.in), &r)
			if r != tc.want {
				t.Fatalf("got %+v, want %+v", r, tc.want)
			}
		})
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		mask [2]uint64
		ok   bool
	}{
		{"0-1\n", 2, [2]uint64{3, 0}, true},
		{"0,2,4-5", 4, [2]uint64{0b110101, 0}, true},
		{"64", 1, [2]uint64{0, 1}, true},
		{"1-1,1", 1, [2]uint64{2, 0}, true},
		{"", 0, [2]uint64{}, false},
		{"\n", 0, [2]uint64{}, false},
		{"3-1", 0, [2]uint64{}, false},
		{"0,", 0, [2]uint64{}, false},
		{"-1", 0, [2]uint64{}, false},
	}
	for _, tc := range tests {
		var m [2]uint64
		n, ok := parseCPUList([]byte(tc.in), &m)
		if ok != tc.ok || (ok && (n != tc.n || m != tc.mask)) {
			t.Errorf("parseCPUList(%q) = %d %b %v, want %d %b %v", tc.in, n, m, ok, tc.n, tc.mask, tc.ok)
		}
	}
}

// The cgroup cpuset narrows the affinity: a fixture cpuset of "1" leaves at
// most one CPU, and only one the affinity allows.
func TestCPUAllowedIntersectsCpuset(t *testing.T) {
	var a CPUAllowed
	readCPUAllowed(nil, &a)
	if !a.Present {
		t.Skip("no affinity mask on this platform")
	}
	if a.N != a.Online || a.N < 1 || a.N > runtime.NumCPU() && runtime.NumCPU() < maxCPUList {
		t.Fatalf("without a cpuset: %+v (NumCPU %d)", a, runtime.NumCPU())
	}
	var b CPUAllowed
	readCPUAllowed([]byte("1\n"), &b)
	want := 0
	if a.Mask[0]&2 != 0 {
		want = 1
	}
	if b.N != want || b.Mask[0]&^2 != 0 || b.Mask[1] != 0 {
		t.Fatalf("cpuset 1 ∩ affinity %b: %+v, want %d CPU", a.Mask, b, want)
	}
}

// A Reader over a fixture tree reads the CPU pressure and run queue files.
func TestReaderCPULoad(t *testing.T) {
	root := t.TempDir()
	must := func(p, s string) { writeUnder(t, root, p, s) }
	must("proc/pressure/cpu", "some avg10=42.50 avg60=10.00 avg300=2.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
	must("proc/loadavg", "3.00 2.00 1.00 5/300 999\n")
	r, err := NewReader(WithRoot(root), WithSources(SourceCPULoad))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var s Snapshot
	r.Read(&s)
	if !s.CPUPSI.Some.Present || s.CPUPSI.Some.Avg10 != 42.5 {
		t.Fatalf("cpu psi %+v", s.CPUPSI)
	}
	if s.Runnable != (Runnable{true, 5, 300, 3}) {
		t.Fatalf("runnable %+v", s.Runnable)
	}
}

func FuzzLoadavg(f *testing.F) {
	seeds(f, "/proc/loadavg")
	f.Add([]byte("0.00 0.01 0.05 1/123 4567\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Runnable
		parseLoadavg(b, &r)
		if r.Present && (r.Running < 0 || r.Total < r.Running || r.Load1 < 0) {
			t.Fatalf("bad reading %+v from %q", r, b)
		}
		if !r.Present && r != (Runnable{}) {
			t.Fatalf("absent reading with values %+v", r)
		}
	})
}

func FuzzCPUList(f *testing.F) {
	seeds(f, "/sys/fs/cgroup/cpuset.cpus.effective", "/sys/devices/system/cpu/online")
	f.Add([]byte("0-3,5,7-8\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m [2]uint64
		n, ok := parseCPUList(b, &m)
		bits := 0
		for _, w := range m {
			for ; w != 0; w &= w - 1 {
				bits++
			}
		}
		if ok && (n != bits || n == 0) || !ok && n != 0 {
			t.Fatalf("parseCPUList(%q) = %d %v with %d bits", b, n, ok, bits)
		}
	})
}

// The CPU readings reach the ABI fields with their presence bits.
func TestSnapshotFillCPULoad(t *testing.T) {
	s := Snapshot{
		CPUPSI:   PSI{Present: true, Some: PSILine{Present: true, Avg10: 37.5}},
		Runnable: Runnable{Present: true, Running: 4, Total: 100},
		Allowed:  CPUAllowed{Present: true, N: 2, Online: 2},
	}
	var d abi.Sensors
	s.Fill(&d)
	if d.Present&abi.PresentCPUPSI == 0 || d.CPUPSISomeAvg10 != 37.5 {
		t.Fatalf("cpu psi: %v %v", d.Present&abi.PresentCPUPSI, d.CPUPSISomeAvg10)
	}
	if d.Present&abi.PresentCPULoad == 0 || d.CPURunnable != 4 || d.CPUAllowed != 2 {
		t.Fatalf("cpu load: %v %v %v", d.Present&abi.PresentCPULoad, d.CPURunnable, d.CPUAllowed)
	}
	var e abi.Sensors
	(&Snapshot{Runnable: Runnable{Present: true, Running: 4}}).Fill(&e)
	if e.Present&(abi.PresentCPULoad|abi.PresentCPUPSI) != 0 {
		t.Fatalf("absent readings set bits %v", e.Present)
	}
}

// Sampler.Invalidate drops the Reader's CPU-load cache too: a run queue that
// changed is seen at the next Snapshot, whatever WithCPULoadInterval says.
func TestSamplerInvalidateCPULoad(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "proc/loadavg")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1.00 1.00 1.00 1/300 999\n")
	r, err := NewReader(WithRoot(root), WithSources(SourceCPULoad), WithCPULoadInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := NewSampler(r, nil, time.Hour)
	if got := s.Snapshot().Runnable.Running; got != 1 {
		t.Fatalf("running %d, want 1", got)
	}
	write("3.00 1.00 1.00 3/300 999\n")
	s.Invalidate()
	if got := s.Snapshot().Runnable.Running; got != 3 {
		t.Fatalf("after Invalidate: running %d, want 3 (the Reader's CPU-load cache was kept)", got)
	}
	write("2.00 1.00 1.00 2/300 999\n")
	if got := s.Snapshot().Runnable.Running; got != 3 {
		t.Fatalf("without Invalidate: running %d, want the cached 3", got)
	}
}

// writeUnder writes s to the file p under root, making its directories: a
// fake /proc or /sys for a Reader made WithRoot(root).
func writeUnder(t *testing.T, root, p, s string) {
	t.Helper()
	p = filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
