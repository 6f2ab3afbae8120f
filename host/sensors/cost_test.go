package sensors

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The cost ceiling of one Reader.Read, by the files it reads: memBudget for
// the memory group, whose files every device has in a fixed number
// (meminfo, PSI, statm, the cgroup limit chain and counters, smaps_rollup
// when due), plus perFileBudget for each thermal zone, power-supply file and
// cpufreq core, whose number grows with the device (a many-core phone has
// up to MaxCPUs cores and MaxThermalZones zones). perFileBudget is a pread
// of a file of a few bytes plus an integer parse: a system call, about 1 µs
// on the CPUs here, with room for a slower core.
const (
	memBudget     = 50 * time.Microsecond
	perFileBudget = 2 * time.Microsecond
)

// scaledFiles counts the files of r that perFileBudget covers.
func scaledFiles(r *Reader) int {
	n := len(r.thermal.temp) + len(r.cpufreq.cur)
	for _, f := range r.power.files {
		for _, k := range []kfile{f.capacity, f.status, f.online} {
			if k.ok() {
				n++
			}
		}
	}
	return n
}

// readBudget is the ceiling for one Read of r.
func readBudget(r *Reader) time.Duration {
	return memBudget + time.Duration(scaledFiles(r))*perFileBudget
}

// threadCPU is the calling thread's CPU time (user + system).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// testReadCost measures Read over the thread's CPU time, not wall time: on a
// shared machine a long loop is descheduled for longer than it runs, and
// that time is not the Reader's. It takes the best of up to 50 rounds of the
// mean over 20 reads (with the default smaps interval, so smaps_rollup is
// read once) and checks it against readBudget.
func testReadCost(t *testing.T, name string, r *Reader) {
	t.Helper()
	if raceEnabled {
		t.Skip("timing is meaningless under -race")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	budget := readBudget(r)
	var s Snapshot
	best := time.Duration(math.MaxInt64)
	for round := 0; round < 50; round++ {
		const n = 20
		start := threadCPU()
		for i := 0; i < n; i++ {
			r.Read(&s)
		}
		best = min(best, (threadCPU()-start)/n)
		if round >= 4 && best <= budget/2 {
			break
		}
	}
	t.Logf("%s: %v thread CPU time per read of every sensor (best round); %d thermal/power/cpufreq files; budget %v", name, best, scaledFiles(r), budget)
	if best > budget {
		t.Errorf("%s: reading every sensor costs %v, budget %v (%v + %d files × %v)", name, best, budget, memBudget, scaledFiles(r), perFileBudget)
	}
}

// TestReadAllCostPhoneTree measures Read on a fixture tree the size of a
// many-core phone: testdata/phone-v2 (cgroup v2 chain, PSI, a battery and a
// USB supply) with MaxCPUs cpufreq cores and MaxThermalZones thermal zones.
// The files are ordinary files in a temp dir, so this is the Reader's own
// cost (system calls and parsing); a real phone's thermal drivers may take
// longer to answer, which no fixture can show.
func TestReadAllCostPhoneTree(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/phone-v2")); err != nil {
		t.Fatal(err)
	}
	write := func(rel, v string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range MaxCPUs {
		d := fmt.Sprintf("sys/devices/system/cpu/cpu%d/cpufreq/", i)
		write(d+"scaling_cur_freq", strconv.Itoa(1_000_000+i*1000))
		write(d+"cpuinfo_max_freq", "2400000")
	}
	for i := range MaxThermalZones {
		d := fmt.Sprintf("sys/class/thermal/thermal_zone%d/", i)
		write(d+"type", fmt.Sprintf("zone-%d", i))
		write(d+"temp", strconv.Itoa(40_000+i*100))
	}
	r, err := NewReader(WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.cpufreq.cur) != MaxCPUs || len(r.thermal.temp) != MaxThermalZones {
		t.Fatalf("tree has %d cpufreq cores and %d zones, want %d and %d", len(r.cpufreq.cur), len(r.thermal.temp), MaxCPUs, MaxThermalZones)
	}
	var s Snapshot
	r.Read(&s)
	if !s.Mem.Present || !s.Cgroup.Present || s.CPU.N != MaxCPUs || s.Thermal.N != MaxThermalZones {
		t.Fatalf("fixture not read whole: mem %v cgroup %v cpus %d zones %d", s.Mem.Present, s.Cgroup.Present, s.CPU.N, s.Thermal.N)
	}
	testReadCost(t, "phone-sized tree", r)
}
