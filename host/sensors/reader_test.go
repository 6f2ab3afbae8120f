package sensors

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
)

func openFixture(t *testing.T, name string, opts ...Option) *Reader {
	t.Helper()
	r, err := NewReader(append([]Option{WithRoot(filepath.Join("testdata", name))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

const kib = 1024

func TestReaderFixtures(t *testing.T) {
	tests := []struct {
		name  string
		check func(t *testing.T, s *Snapshot)
	}{
		{"phone-v2", func(t *testing.T, s *Snapshot) {
			if !s.Mem.Present || s.Mem.Total != 7812340*kib || s.Mem.Available != 2101232*kib || s.Mem.Has&MemAvailable == 0 {
				t.Errorf("meminfo = %+v", s.Mem)
			}
			if s.Mem.SwapFree != 3000000*kib || s.Mem.Shmem != 40000*kib {
				t.Errorf("meminfo swap/shmem = %d %d", s.Mem.SwapFree, s.Mem.Shmem)
			}
			if !s.PSI.Present || s.PSI.Some.Avg10 != 12.34 || s.PSI.Some.Avg300 != 1.25 || s.PSI.Full.Avg10 != 3.5 || s.PSI.Some.TotalUS != 987654 {
				t.Errorf("psi = %+v", s.PSI)
			}
			cg := s.Cgroup
			if !cg.Present || cg.Version != 2 || filepath.Base(cg.Dir) != "pid_4242" {
				t.Errorf("cgroup = %+v", cg)
			}
			if !cg.Limited || cg.Limit != 3<<30 || cg.Usage != 1<<30 {
				t.Errorf("cgroup limit %v %d usage %d, want the parent's 3 GiB and 1 GiB", cg.Limited, cg.Limit, cg.Usage)
			}
			if e := cg.Events; !e.Present || e.High != 7 || e.Max != 3 || e.OOM != 2 || e.OOMKill != 1 {
				t.Errorf("events = %+v", e)
			}
			if !s.Smaps.Present || s.Smaps.Rss != 812340*kib || s.Smaps.Pss != 640000*kib || s.Smaps.PssFile != 238000*kib || s.Smaps.SwapPss != 1024*kib {
				t.Errorf("smaps = %+v", s.Smaps)
			}
			if s.Thermal.N != 3 || s.Thermal.Zones[2].Index != 10 || s.Thermal.Zones[1].Type != "skin-therm" {
				t.Fatalf("thermal zones: n=%d %+v", s.Thermal.N, s.Thermal.Zones[:3])
			}
			if z := s.Thermal.Zones[1]; z.NTrips != 3 || z.Trips[0].Type != TripPassive || z.Trips[2].TempMC != 60000 {
				t.Errorf("skin trips (the disabled 0 °C trip dropped) = %+v", z.Trips[:z.NTrips])
			}
			if st, hot, ok := s.Thermal.Status(); !ok || st != abi.ThermalModerate || hot != 47000 {
				t.Errorf("thermal status = %v %d %v, want moderate (skin 41.5 °C vs passive 44 °C) at 47 °C", st, hot, ok)
			}
			b, ok := s.Power.Battery()
			if !ok || b.Capacity != 73 || b.Status != StatusDischarging {
				t.Errorf("battery = %+v %v", b, ok)
			}
			if on, known := s.Power.ExternalPower(); on || !known {
				t.Errorf("external power = %v %v", on, known)
			}
			if r, ok := s.CPU.Ratio(); !ok || s.CPU.N != 4 || math.Abs(r-0.625) > 1e-9 {
				t.Errorf("cpufreq n=%d ratio=%v", s.CPU.N, r)
			}
		}},
		{"hybrid-v1", func(t *testing.T, s *Snapshot) {
			if s.Mem.Has&MemAvailable != 0 {
				t.Errorf("MemAvailable present in a fixture without it")
			}
			if v, ok := s.Mem.AvailableEstimate(); !ok || v != (22768588+71512+1486792)*kib {
				t.Errorf("available estimate = %d", v)
			}
			if s.PSI.Present {
				t.Errorf("psi present")
			}
			cg := s.Cgroup
			if !cg.Present || cg.Version != 1 || !cg.Limited || cg.Limit != 512<<20 || cg.Usage != 3751936 {
				t.Errorf("cgroup = %+v", cg)
			}
			if e := cg.Events; e.OOMKill != 4 || e.Max != 17 || e.UnderOOM {
				t.Errorf("v1 events = %+v", e)
			}
			if s.Thermal.N != 0 || s.Power.N != 0 || s.CPU.N != 0 {
				t.Errorf("thermal/power/cpu present: %d %d %d", s.Thermal.N, s.Power.N, s.CPU.N)
			}
			if _, _, ok := s.Thermal.Status(); ok {
				t.Errorf("thermal status without zones")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := openFixture(t, tc.name)
			var s Snapshot
			r.Read(&s)
			tc.check(t, &s)
		})
	}
}

func TestReaderEmptyRoot(t *testing.T) {
	r, err := NewReader(WithRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var s Snapshot
	r.Read(&s)
	if s.Mem.Present || s.PSI.Present || s.Cgroup.Present || s.Smaps.Present || s.Thermal.N+s.Power.N+s.CPU.N != 0 {
		t.Errorf("readings present on an empty tree: %+v", s)
	}
	var a abi.Sensors
	s.Fill(&a)
	if a.Present != 0 {
		t.Errorf("presence bits %b on an empty tree", a.Present)
	}
	if _, err := NewReader(WithRoot(filepath.Join(t.TempDir(), "nope"))); err == nil {
		t.Errorf("missing root: no error")
	}
}

func TestWithSourcesAndZoneTypes(t *testing.T) {
	r := openFixture(t, "phone-v2", WithSources(SourceMeminfo|SourceThermal), WithThermalZoneTypes("skin-therm"))
	var s Snapshot
	r.Read(&s)
	if !s.Mem.Present || s.PSI.Present || s.Smaps.Present || s.Cgroup.Present || s.Power.N != 0 {
		t.Errorf("sources not limited: %+v", s)
	}
	if s.Thermal.N != 1 || s.Thermal.Zones[0].Type != "skin-therm" {
		t.Errorf("zones = %d %q", s.Thermal.N, s.Thermal.Zones[0].Type)
	}
}

func TestFillFixture(t *testing.T) {
	r := openFixture(t, "phone-v2")
	var s Snapshot
	r.Read(&s)
	var a abi.Sensors
	a.TokPerSec = 12 // engine telemetry is left alone
	a.Present = abi.PresentTokPerSec
	s.Fill(&a)
	want := abi.Sensors{
		Present: abi.PresentTokPerSec | abi.PresentMemAvailable | abi.PresentMemTotal | abi.PresentPSISome | abi.PresentPSIFull |
			abi.PresentCgroupLimit | abi.PresentCgroupUsage | abi.PresentRSS | abi.PresentPSS |
			abi.PresentThermalStatus | abi.PresentTemp | abi.PresentBattery | abi.PresentCharging,
		TokPerSec:      12,
		MemAvailableMB: 2051, MemTotalMB: 7629,
		PSISomeAvg10: 12.34, PSIFullAvg10: 3.5,
		CgroupLimitMB: 3072, CgroupUsageMB: 1024,
		RSSMB: 793, PSSMB: 625, // RSS from statm: 203085 pages × 4 KiB
		ThermalStatus: abi.ThermalModerate, TempC: 47,
		BatteryPct: 73, Charging: false,
	}
	if a != want {
		t.Errorf("Fill:\n got %+v\nwant %+v", a, want)
	}
}

func TestZoneStatus(t *testing.T) {
	trips := func(tt ...any) (z ThermalZone) {
		for i := 0; i < len(tt); i += 2 {
			z.Trips[z.NTrips] = Trip{Type: tt[i].(TripType), TempMC: int64(tt[i+1].(int)), Present: true}
			z.NTrips++
		}
		return z
	}
	phone := trips(TripPassive, 44000, TripHot, 49000, TripCritical, 60000)
	bare := trips()
	critOnly := trips(TripCritical, 100000)
	tests := []struct {
		name string
		zone ThermalZone
		temp int64
		want abi.ThermalStatus
	}{
		{"cool", phone, 30000, abi.ThermalNone},
		{"light", phone, 34000, abi.ThermalLight},
		{"moderate", phone, 39000, abi.ThermalModerate},
		{"severe at passive", phone, 44000, abi.ThermalSevere},
		{"hot trip is emergency", phone, 49000, abi.ThermalEmergency},
		{"critical trip is shutdown", phone, 60000, abi.ThermalShutdown},
		{"no trips: default passive 85", bare, 86000, abi.ThermalSevere},
		{"no trips: midway is critical", bare, 95000, abi.ThermalCritical},
		{"no trips: cool", bare, 40000, abi.ThermalNone},
		{"critical only: passive 85 default", critOnly, 80000, abi.ThermalModerate},
		{"critical only: shutdown", critOnly, 100000, abi.ThermalShutdown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			z := tc.zone
			z.TempMC = tc.temp
			if got := ZoneStatus(&z); got != tc.want {
				t.Errorf("ZoneStatus(%d m°C) = %v, want %v", tc.temp, got, tc.want)
			}
		})
	}
}

// TestReadRealMachine reads this machine's kernel files and checks only what
// must hold on any Linux.
func TestReadRealMachine(t *testing.T) {
	r, err := NewReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var s Snapshot
	r.Read(&s)
	for _, l := range r.Describe() {
		t.Log(l)
	}
	if !s.Mem.Present || s.Mem.Total <= 0 {
		t.Fatalf("MemTotal = %d (present %v)", s.Mem.Total, s.Mem.Present)
	}
	if av, ok := s.Mem.AvailableEstimate(); !ok || av <= 0 || av > s.Mem.Total {
		t.Errorf("available %d of total %d", av, s.Mem.Total)
	}
	if _, err := os.Stat("/proc/self/smaps_rollup"); err == nil {
		if !s.Smaps.Present || s.Smaps.Rss <= 0 || s.Smaps.Pss <= 0 || s.Smaps.Pss > s.Smaps.Rss {
			t.Errorf("smaps_rollup: %+v", s.Smaps)
		}
	}
	if _, err := os.Stat("/proc/pressure/memory"); err == nil && !s.PSI.Some.Present {
		t.Errorf("PSI file exists but not read: %+v", s.PSI)
	}
	if s.Cgroup.Present && s.Cgroup.Usage <= 0 {
		t.Errorf("cgroup usage %d", s.Cgroup.Usage)
	}
	for i := 0; i < s.Thermal.N; i++ {
		t.Logf("thermal zone %d %s: %d m°C", s.Thermal.Zones[i].Index, s.Thermal.Zones[i].Type, s.Thermal.Zones[i].TempMC)
	}
	if s.Time.IsZero() || time.Since(s.Time) > time.Minute {
		t.Errorf("snapshot time %v", s.Time)
	}
}

func TestReadAllocs(t *testing.T) {
	for _, root := range []string{"/", "testdata/phone-v2"} {
		r, err := NewReader(WithRoot(root))
		if err != nil {
			t.Fatal(err)
		}
		var s Snapshot
		var a abi.Sensors
		if n := testing.AllocsPerRun(100, func() { r.Read(&s); s.Fill(&a) }); n != 0 {
			t.Errorf("%s: Read+Fill allocates %v times", root, n)
		}
		r.Close()
	}
}

// TestReadAllCost checks that reading every sensor of this machine stays
// within readBudget for the files this machine has (readAllCost; see
// cost_test.go for the budget and for a phone-sized tree).
func TestReadAllCost(t *testing.T) {
	r, err := NewReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	testReadCost(t, "this machine", r)
}

func BenchmarkReadAll(b *testing.B) {
	for _, bc := range []struct {
		name  string
		every time.Duration
	}{{"default", DefaultSmapsInterval}, {"smaps-every-read", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			r, err := NewReader(WithSmapsInterval(bc.every))
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			var s Snapshot
			b.ReportAllocs()
			for b.Loop() {
				r.Read(&s)
			}
		})
	}
}

func BenchmarkReadAllFixture(b *testing.B) {
	r, err := NewReader(WithRoot("testdata/phone-v2"))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var s Snapshot
	b.ReportAllocs()
	for b.Loop() {
		r.Read(&s)
	}
}

func TestSmapsInterval(t *testing.T) {
	r, err := NewReader(WithSources(SourceSmaps|SourceStatm), WithSmapsInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var s1, s2 Snapshot
	r.Read(&s1)
	big := make([]byte, 64<<20) // 64 MiB touched: RSS must grow on a fresh read
	for i := range big {
		big[i] = 1
	}
	r.Read(&s2)
	if !s1.Smaps.Present || s2.Smaps != s1.Smaps {
		t.Errorf("within the interval the reading is not carried forward: %+v vs %+v", s1.Smaps, s2.Smaps)
	}
	if s2.Statm.Resident < s1.Statm.Resident+60<<20 {
		t.Errorf("statm RSS not fresh: %d then %d MiB", s1.Statm.Resident>>20, s2.Statm.Resident>>20)
	}
	fresh, _ := NewReader(WithSources(SourceSmaps), WithSmapsInterval(0))
	defer fresh.Close()
	var s3 Snapshot
	fresh.Read(&s3)
	if s3.Smaps.Rss < s1.Smaps.Rss+60<<20 {
		t.Errorf("fresh RSS %d MiB, want ≥ %d MiB + 60", s3.Smaps.Rss>>20, s1.Smaps.Rss>>20)
	}
	big[len(big)-1] = 2
}

// BenchmarkSmapsRollupResident measures smaps_rollup with 512 MiB resident
// (anonymous, touched), against BenchmarkReadAll's small test process: the
// read cost grows with the resident size.
func BenchmarkSmapsRollupResident(b *testing.B) {
	big := make([]byte, 512<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	r, err := NewReader(WithSources(SourceSmaps), WithSmapsInterval(0))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var s Snapshot
	for b.Loop() {
		r.Read(&s)
	}
	b.ReportMetric(float64(s.Smaps.Rss>>20), "rss_MiB")
	big[0] = 2
}

// A smaps_rollup read that costs more than 1/smapsCostDiv of the interval
// stretches the wait to smapsCostDiv times its cost, at most
// maxSmapsStretch intervals.
func TestSmapsWait(t *testing.T) {
	for _, tc := range []struct {
		every, cost, want time.Duration
	}{
		{time.Second, 50 * time.Microsecond, time.Second},             // a small process: the interval
		{time.Second, 100 * time.Microsecond, time.Second},            // exactly 0.01%
		{time.Second, 400 * time.Microsecond, 4 * time.Second},        // stretched
		{time.Second, 4 * time.Millisecond, 10 * time.Second},         // a 560 MiB model resident: capped
		{100 * time.Millisecond, 200 * time.Microsecond, time.Second}, // capped at 10 intervals
		{time.Second, 0, time.Second},
	} {
		if got := smapsWait(tc.every, tc.cost); got != tc.want {
			t.Errorf("smapsWait(%v, %v) = %v, want %v", tc.every, tc.cost, got, tc.want)
		}
	}
}
