package native

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// Kernel samepage merging (KSM) for the shared-anchor tests (anchors.go).
// KSM is global: the test switches it on where it can write
// /sys/kernel/mm/ksm/run, tunes it for speed, and restores every knob.

const ksmDir = "/sys/kernel/mm/ksm"

type ksm struct {
	t     testing.TB
	saved map[string]string
}

// ksmOn switches KSM on with fast scanning (restored at cleanup), or skips
// with the reason it cannot.
func ksmOn(t testing.TB) *ksm {
	t.Helper()
	k := &ksm{t: t, saved: map[string]string{}}
	knobs := []struct{ name, val string }{
		{"pages_to_scan", "5000"}, {"sleep_millisecs", "5"}, {"smart_scan", "0"}, {"run", "1"},
	}
	for _, kn := range knobs {
		b, err := os.ReadFile(filepath.Join(ksmDir, kn.name))
		if err != nil {
			if kn.name == "smart_scan" { // newer kernels only
				continue
			}
			t.Skipf("KSM: %v (the kernel has no KSM or it is not visible here)", err)
		}
		k.saved[kn.name] = strings.TrimSpace(string(b))
	}
	if f, err := os.OpenFile(filepath.Join(ksmDir, "run"), os.O_WRONLY, 0); err != nil {
		t.Skipf("KSM: cannot switch it on: %v (needs root and a writable /sys)", err)
	} else {
		f.Close()
	}
	t.Cleanup(k.restore)
	k.write("run", "0") // knobs first, then on
	for _, kn := range knobs {
		if _, ok := k.saved[kn.name]; ok {
			k.write(kn.name, kn.val)
		}
	}
	return k
}

func (k *ksm) write(name, val string) {
	if err := os.WriteFile(filepath.Join(ksmDir, name), []byte(val), 0); err != nil {
		k.t.Fatalf("KSM: write %s=%s: %v", name, val, err)
	}
}

// restore puts back every knob (run last, as it was: merged pages of
// unmapped memory are gone with it; run 0 leaves the rest merged).
func (k *ksm) restore() {
	if run, ok := k.saved["run"]; ok {
		os.WriteFile(filepath.Join(ksmDir, "run"), []byte("0"), 0)
		for name, v := range k.saved {
			if name != "run" {
				os.WriteFile(filepath.Join(ksmDir, name), []byte(v), 0)
			}
		}
		os.WriteFile(filepath.Join(ksmDir, "run"), []byte(run), 0)
	}
}

// read returns a KSM counter.
func (k *ksm) read(name string) int64 {
	b, err := os.ReadFile(filepath.Join(ksmDir, name))
	if err != nil {
		k.t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		k.t.Fatalf("KSM %s: %v", name, err)
	}
	return n
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// waitSharing polls until pages_sharing reaches want, bounded by ksmd's
// own progress: maxScans full scans after the call (each scan visits every
// mergeable page; a page merges on the second scan that finds it
// unchanged), not by a sleep. It returns the counter and the full scans
// it took. A stalled ksmd (no scan completing for a minute) fails.
func (k *ksm) waitSharing(want int64, maxScans int64) (got, scans int64) {
	k.t.Helper()
	return k.wait(func(n int64) bool { return n >= want }, maxScans)
}

// wait polls pages_sharing until done(it) holds, bounded by maxScans full
// scans as waitSharing.
func (k *ksm) wait(done func(int64) bool, maxScans int64) (got, scans int64) {
	k.t.Helper()
	scans = k.until(func() bool { got = k.read("pages_sharing"); return done(got) }, maxScans)
	return got, scans
}

// until polls done until it holds or maxScans full scans have completed
// since the call (then it asks done once more: the last scan may have
// merged), and returns the full scans it took. A stalled ksmd (no scan
// completing for a minute) fails.
func (k *ksm) until(done func() bool, maxScans int64) (scans int64) {
	k.t.Helper()
	start := k.read("full_scans")
	last, lastT := start, time.Now()
	for {
		fs := k.read("full_scans")
		if done() || fs-start >= maxScans {
			if fs-start >= maxScans {
				done()
			}
			return fs - start
		}
		if fs != last {
			last, lastT = fs, time.Now()
		} else if time.Since(lastT) > time.Minute {
			k.t.Fatalf("KSM: ksmd completed no full scan in a minute (full_scans %d): no mergeable memory registered?", fs)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// mergingPages is how many of process pid's pages are merged by KSM
// (/proc/PID/ksm_merging_pages, Linux 6.1+; "self" for this process): a
// per-process count, unlike pages_sharing, which every process on the
// machine using KSM moves. ok is false where the file is missing.
func mergingPages(pid string) (n int64, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "ksm_merging_pages"))
	if err != nil {
		return 0, false
	}
	n, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// ksmdTicks is ksmd's CPU time (utime+stime, clock ticks of 1/100 s on
// Linux) from /proc/<pid>/stat; -1 when the thread is not visible.
func ksmdTicks() int64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "ksmd" {
			continue
		}
		st, err := os.ReadFile(d + "/stat")
		if err != nil {
			return -1
		}
		// Fields after "(ksmd) ": state is field 3; utime, stime 14, 15.
		_, rest, _ := strings.Cut(string(st), ") ")
		f := strings.Fields(rest)
		if len(f) < 13 {
			return -1
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		return u + s
	}
	return -1
}

// vmaSpan is an address range [lo, hi).
type vmaSpan struct{ lo, hi uint64 }

// zoneSpans are the anchor zones of arenas (each zone is a private
// anonymous VMA of its own).
func zoneSpans(arenas []*KVArena) []vmaSpan {
	var zs []vmaSpan
	for _, a := range arenas {
		base := uint64(uintptrOf(a.mem.Bytes()))
		for il := range a.K {
			for _, off := range []int64{a.kOff[il], a.vOff[il]} {
				zs = append(zs, vmaSpan{base + uint64(off), base + uint64(off+a.zone)})
			}
		}
	}
	return zs
}

// zoneKB sums Rss and Pss (kB) of this process's VMAs that overlap the
// anchor zones of arenas.
func zoneKB(t testing.TB, arenas []*KVArena) (rss, pss int64) {
	t.Helper()
	return spansKB(t, "/proc/self/smaps", zoneSpans(arenas))
}

// spansKB sums Rss and Pss (kB) of the VMAs in smaps (a /proc/PID/smaps)
// that overlap zs.
func spansKB(t testing.TB, smaps string, zs []vmaSpan) (rss, pss int64) {
	t.Helper()
	f, err := os.Open(smaps)
	if err != nil {
		t.Skipf("smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			in = false
			if err1 != nil || err2 != nil {
				continue
			}
			for _, z := range zs {
				in = in || (a < z.hi && b > z.lo)
			}
			continue
		}
		if in && len(fields) >= 2 && (fields[0] == "Rss:" || fields[0] == "Pss:") {
			n, _ := strconv.ParseInt(fields[1], 10, 64)
			if fields[0] == "Rss:" {
				rss += n
			} else {
				pss += n
			}
		}
	}
	return rss, pss
}
