package sensors

import (
	"math"
	"os"
	"testing"
)

// seeds adds the fixture files and this machine's file (when it exists) to a
// fuzz corpus, plus a few hostile inputs.
func seeds(f *testing.F, paths ...string) {
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{"", "\n", ":", "MemTotal:", "MemTotal: -5 kB", "MemTotal: 99999999999999999999999 kB",
		"some avg10=", "some avg10=1e9 total=-1", "full avg10=.5", "oom_kill 18446744073709551615", "max\n", "\x00\x00"} {
		f.Add([]byte(s))
	}
}

func FuzzMeminfo(f *testing.F) {
	seeds(f, "testdata/phone-v2/proc/meminfo", "testdata/hybrid-v1/proc/meminfo", "/proc/meminfo")
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Meminfo
		parseMeminfo(b, &m)
		for _, v := range []int64{m.Total, m.Free, m.Available, m.Buffers, m.Cached, m.SwapTotal, m.SwapFree, m.AnonPages, m.Mapped, m.Shmem, m.Dirty} {
			if v < 0 {
				t.Fatalf("negative field in %+v", m)
			}
		}
		if m.Has&MemTotal == 0 && m.Total != 0 {
			t.Fatalf("MemTotal set without its presence bit")
		}
	})
}

func FuzzPSI(f *testing.F) {
	seeds(f, "testdata/phone-v2/proc/pressure/memory", "/proc/pressure/memory")
	f.Fuzz(func(t *testing.T, b []byte) {
		var p PSI
		parsePSI(b, &p)
		for _, l := range []PSILine{p.Some, p.Full} {
			for _, v := range []float64{l.Avg10, l.Avg60, l.Avg300} {
				if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("bad average in %+v", p)
				}
			}
		}
	})
}

func FuzzSmapsRollup(f *testing.F) {
	seeds(f, "testdata/phone-v2/proc/self/smaps_rollup", "/proc/self/smaps_rollup")
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Smaps
		parseSmapsRollup(b, &s)
		for _, v := range []int64{s.Rss, s.Pss, s.PssAnon, s.PssFile, s.Swap, s.SwapPss} {
			if v < 0 {
				t.Fatalf("negative field in %+v", s)
			}
		}
		var st Statm
		parseStatm(b, 4096, &st)
		if st.Present && (st.Size < 0 || st.Resident < 0 || st.Shared < 0) {
			t.Fatalf("negative statm %+v", st)
		}
	})
}

func FuzzCgroupEvents(f *testing.F) {
	seeds(f, "testdata/phone-v2/sys/fs/cgroup/apps/uid_10123/pid_4242/memory.events",
		"testdata/hybrid-v1/sys/fs/cgroup/memory/process_api/abc/memory.oom_control")
	f.Fuzz(func(t *testing.T, b []byte) {
		var e MemoryEvents
		parseMemoryEvents(b, &e)
		if !e.Present && (e.Low|e.High|e.Max|e.OOM|e.OOMKill != 0 || e.UnderOOM) {
			t.Fatalf("values without presence: %+v", e)
		}
		l, limited, ok := parseLimit(b)
		if (!ok || !limited) && l != 0 || l < 0 {
			t.Fatalf("parseLimit(%q) = %d %v %v", b, l, limited, ok)
		}
	})
}

func FuzzCgroupDiscovery(f *testing.F) {
	f.Add("0::/a/b", "30 22 0:26 / /sys/fs/cgroup rw - cgroup2 none rw")
	f.Add("4:memory:/x\n0::/", "28 26 0:25 /x /sys/fs/cgroup/mem\\040ory rw - cgroup cgroup rw,memory")
	f.Fuzz(func(t *testing.T, procCg, mountinfo string) {
		for _, m := range parseMountinfo(mountinfo) {
			for _, l := range parseProcCgroup(procCg) {
				_ = joinCgroup("/root", m, l.path)
			}
		}
	})
}

func TestParseEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		ok   bool
	}{
		{"plain", "123", 123, true},
		{"blanks and unit", "  42 kB\n", 42, true},
		{"negative", "-273000", -273000, true},
		{"saturates", "99999999999999999999999", maxInt, true},
		{"empty", "", 0, false},
		{"no digits", "max", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseInt([]byte(tc.in))
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseInt(%q) = %d %v, want %d %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
	for _, tc := range []struct {
		in   string
		want float64
	}{{"0.00", 0}, {"12.34", 12.34}, {"100", 100}, {".5", 0.5}, {"1.1234567891234", 1.123456789}} {
		if got, ok := parseDecimal([]byte(tc.in)); !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("parseDecimal(%q) = %v %v, want %v", tc.in, got, ok, tc.want)
		}
	}
	if got := unescapeMount(`/a\040b\`); got != `/a b\` {
		t.Errorf("unescapeMount = %q", got)
	}
}
