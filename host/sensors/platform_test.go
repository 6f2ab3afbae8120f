package sensors

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
)

// fakeClock is a settable clock for staleness tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestPlatformPrecedenceAndStaleness(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p := NewPlatform(DefaultStaleness)
	p.now = clk.now
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.PushMemoryInfo(1500<<20, 300<<20, 8000<<20, true))
	must(p.PushTrimLevel(int(abi.TrimRunningCritical)))
	must(p.PushThermalStatus(int(abi.ThermalSevere)))
	must(p.PushBattery(15.5, false))

	// File readings of the phone fixture first, then the pushed ones on top.
	r := openFixture(t, "phone-v2")
	var s Snapshot
	r.Read(&s)
	fill := func(at time.Time) abi.Sensors {
		var a abi.Sensors
		s.Fill(&a)
		p.Apply(&a, at)
		return a
	}
	tests := []struct {
		name  string
		at    time.Duration
		check func(a abi.Sensors) bool
	}{
		{"pushed memory wins", 0, func(a abi.Sensors) bool {
			return a.MemAvailableMB == 1500 && a.MemThresholdMB == 300 && a.MemTotalMB == 8000 && a.LowMemory &&
				a.Has(abi.PresentMemThreshold|abi.PresentLowMemory)
		}},
		{"pushed thermal wins over trip-point derivation", 0, func(a abi.Sensors) bool {
			return a.ThermalStatus == abi.ThermalSevere && a.TempC == 47 // temperature still from the files
		}},
		{"pushed battery wins", 0, func(a abi.Sensors) bool { return a.BatteryPct == 15.5 && !a.Charging && a.Has(abi.PresentCharging) }},
		{"trim level present", 0, func(a abi.Sensors) bool { return a.TrimLevel == abi.TrimRunningCritical && a.Has(abi.PresentTrimLevel) }},
		{"memory info stale after 5 s: files show", 6 * time.Second, func(a abi.Sensors) bool {
			return a.MemAvailableMB == 2051 && !a.Has(abi.PresentMemThreshold) && !a.Has(abi.PresentLowMemory)
		}},
		{"trim still fresh at 29 s", 29 * time.Second, func(a abi.Sensors) bool { return a.Has(abi.PresentTrimLevel) }},
		{"trim stale at 31 s", 31 * time.Second, func(a abi.Sensors) bool { return !a.Has(abi.PresentTrimLevel) && a.TrimLevel == 0 }},
		{"thermal and battery never stale", time.Hour, func(a abi.Sensors) bool {
			return a.ThermalStatus == abi.ThermalSevere && a.BatteryPct == 15.5
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if a := fill(clk.t.Add(tc.at)); !tc.check(a) {
				t.Errorf("at +%v: %+v", tc.at, a)
			}
		})
	}
	p.Reset()
	if a := fill(clk.t); a.ThermalStatus != abi.ThermalModerate || a.Has(abi.PresentLowMemory) {
		t.Errorf("after Reset: %+v", a)
	}
}

func TestPlatformRejectsOutOfRange(t *testing.T) {
	p := NewPlatform(Staleness{})
	tests := []struct {
		name string
		err  error
	}{
		{"thermal 7", p.PushThermalStatus(7)},
		{"thermal -1", p.PushThermalStatus(-1)},
		{"battery 101", p.PushBattery(101, true)},
		{"battery NaN", p.PushBattery(nan(), true)},
		{"trim 300", p.PushTrimLevel(300)},
		{"negative memory", p.PushMemoryInfo(-1, 0, 0, false)},
	}
	for _, tc := range tests {
		var pe *PushError
		if !errors.As(tc.err, &pe) {
			t.Errorf("%s: err = %v, want *PushError", tc.name, tc.err)
		}
	}
	var a abi.Sensors
	p.Apply(&a, time.Now())
	if a.Present != 0 {
		t.Errorf("rejected pushes were applied: %b", a.Present)
	}
}

func nan() float64 { var z float64; return z / z }

// TestPlatformConcurrent pushes from several goroutines while one reads; run
// with -race it proves the locking.
func TestPlatformConcurrent(t *testing.T) {
	p := NewPlatform(DefaultStaleness)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// avail and total move together: a torn read would show avail > total.
				v := int64(i%1000+1) << 20
				p.PushMemoryInfo(v, 0, v, false)
				p.PushThermalStatus((i + g) % 7)
			}
		}(g)
	}
	var a abi.Sensors
	for i := 0; i < 20000; i++ {
		p.Apply(&a, time.Now())
		if a.MemAvailableMB != a.MemTotalMB {
			t.Fatalf("torn memory info: avail %d total %d", a.MemAvailableMB, a.MemTotalMB)
		}
	}
	close(stop)
	wg.Wait()
	if n := testing.AllocsPerRun(100, func() { p.Apply(&a, time.Now()) }); n != 0 {
		t.Errorf("Apply allocates %v", n)
	}
}

func TestSampler(t *testing.T) {
	r := openFixture(t, "phone-v2")
	p := NewPlatform(DefaultStaleness)
	s := NewSampler(r, p, time.Hour)
	var a abi.Sensors
	a.Present = abi.PresentTokPerSec | abi.PresentLowMemory // a stale bit from an earlier step
	s.Fill(&a)
	s.Fill(&a)
	s.Snapshot()
	if s.Reads() != 1 {
		t.Errorf("reads = %d within one interval, want 1", s.Reads())
	}
	if !a.Has(abi.PresentTokPerSec) || a.Has(abi.PresentLowMemory) || a.MemAvailableMB != 2051 {
		t.Errorf("Fill: %+v", a)
	}
	p.PushMemoryInfo(100<<20, 200<<20, 8000<<20, true)
	s.Fill(&a) // a push shows at once, without a new reading
	if !a.LowMemory || a.MemAvailableMB != 100 || s.Reads() != 1 {
		t.Errorf("push not applied from cache: %+v reads %d", a, s.Reads())
	}
	s.Interval = 0
	s.Fill(&a)
	s.Fill(&a)
	if s.Reads() != 3 {
		t.Errorf("reads = %d with interval 0, want 3", s.Reads())
	}
	s.Interval = time.Hour
	if n := testing.AllocsPerRun(1000, func() { s.Fill(&a) }); n != 0 {
		t.Errorf("Sampler.Fill allocates %v", n)
	}
}

// BenchmarkSamplerFillCached is the per-step cost of the decode loop between
// readings: a clock check, the cached Fill and the Platform overlay.
func BenchmarkSamplerFillCached(b *testing.B) {
	r, err := NewReader(WithRoot("testdata/phone-v2"))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	s := NewSampler(r, NewPlatform(DefaultStaleness), time.Hour)
	var a abi.Sensors
	for b.Loop() {
		s.Fill(&a)
	}
}

// A reading that costs more than 1/readCostDiv of the interval stretches
// the wait to readCostDiv times its cost, at most maxReadStretch intervals;
// an interval ≤ 0 reads every time.
func TestSamplerReadWait(t *testing.T) {
	for _, tc := range []struct {
		every, cost, want time.Duration
	}{
		{100 * time.Millisecond, 50 * time.Microsecond, 100 * time.Millisecond},  // the quiet budget
		{100 * time.Millisecond, 260 * time.Microsecond, 260 * time.Millisecond}, // loaded
		{100 * time.Millisecond, 2 * time.Millisecond, 500 * time.Millisecond},   // capped
		{0, time.Millisecond, 0},
	} {
		if got := readWait(tc.every, tc.cost); got != tc.want {
			t.Errorf("readWait(%v, %v) = %v, want %v", tc.every, tc.cost, got, tc.want)
		}
	}
}
