package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/edgellm/edgellm/abi"
)

// GenOptions configure Generate.
type GenOptions struct {
	Steps      int   // number of records (default 100)
	IntervalMs int64 // time between records (default 100)
	Seed       uint64
	// Params are the scenario's parameters by name (see Scenarios); missing
	// ones take their defaults, unknown ones are an error.
	Params map[string]string
}

// Param is one parameter of a scenario.
type Param struct {
	Name    string
	Default float64
	Help    string
}

// Scenario is a named synthetic trace. Every trace it makes is simulated:
// shaped like the real event, not recorded from a device.
type Scenario struct {
	Name    string
	Summary string
	Params  []Param
	gen     func(g *genState) []Record
}

// Scenarios lists the generators, sorted by name.
func Scenarios() []Scenario {
	out := make([]Scenario, len(scenarios))
	copy(out, scenarios)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ScenarioNames lists the generator names, sorted.
func ScenarioNames() []string {
	var n []string
	for _, s := range Scenarios() {
		n = append(n, s.Name)
	}
	return n
}

// Generate makes the trace of the named scenario. The same options always
// give the same records (the noise comes from a PCG seeded with Seed).
func Generate(name string, opts GenOptions) ([]Record, error) {
	var sc *Scenario
	for i := range scenarios {
		if scenarios[i].Name == name {
			sc = &scenarios[i]
		}
	}
	if sc == nil {
		return nil, fmt.Errorf("unknown scenario %q (one of %s)", name, strings.Join(ScenarioNames(), ", "))
	}
	if opts.Steps == 0 {
		opts.Steps = 100
	}
	if opts.IntervalMs == 0 {
		opts.IntervalMs = 100
	}
	if opts.Steps < 2 || opts.Steps > 10_000_000 {
		return nil, fmt.Errorf("%s: steps %d outside 2–10000000", name, opts.Steps)
	}
	if opts.IntervalMs < 1 {
		return nil, fmt.Errorf("%s: interval %d ms must be ≥ 1", name, opts.IntervalMs)
	}
	g := &genState{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 0x6564676c6c6d)), p: map[string]float64{}}
	for _, p := range sc.Params {
		g.p[p.Name] = p.Default
	}
	for k, v := range opts.Params {
		if _, ok := g.p[k]; !ok {
			var names []string
			for _, p := range sc.Params {
				names = append(names, p.Name)
			}
			return nil, fmt.Errorf("%s: unknown parameter %q (parameters: %s)", name, k, strings.Join(names, ", "))
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s: parameter %s=%q is not a number", name, k, v)
		}
		g.p[k] = f
	}
	return sc.gen(g), nil
}

type genState struct {
	opts GenOptions
	rng  *rand.Rand
	p    map[string]float64
}

func (g *genState) t(i int) int64 { return int64(i) * g.opts.IntervalMs }

// noise is uniform in [-a, a].
func (g *genState) noise(a float64) float64 { return (g.rng.Float64()*2 - 1) * a }

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

func mb(v float64) int32 { return int32(clamp(math.Round(v), 0, math.MaxInt32)) }

var scenarios = []Scenario{
	{
		Name:    "thermal-ramp",
		Summary: "temperature ramps up to a peak thermal status (SEVERE by default), holds, and recovers to NONE",
		Params: []Param{
			{"base_c", 35, "starting and final temperature, °C"},
			{"peak_c", 52, "peak temperature, °C"},
			{"peak_status", float64(abi.ThermalSevere), "thermal status at the peak, 1–6"},
			{"hold", 0.2, "fraction of the trace spent at the peak"},
		},
		gen: genThermalRamp,
	},
	{
		Name:    "background-app",
		Summary: "a background app takes mb MiB at at_ms (released at release_ms if > 0)",
		Params: []Param{
			{"total_mb", 8192, "total memory, MiB"},
			{"avail_mb", 3000, "available memory before the app, MiB"},
			{"threshold_mb", 512, "low-memory threshold, MiB"},
			{"mb", 2000, "memory the app takes, MiB"},
			{"at_ms", 3000, "when the app starts, ms"},
			{"ramp_ms", 500, "how long the app takes to allocate, ms"},
			{"release_ms", 0, "when the app frees its memory, ms (0: never)"},
		},
		gen: genBackgroundApp,
	},
	{
		Name:    "battery-drain",
		Summary: "the battery drains from start_pct to end_pct, unplugged",
		Params: []Param{
			{"start_pct", 100, "battery at the start, %"},
			{"end_pct", 5, "battery at the end, %"},
		},
		gen: genBatteryDrain,
	},
	{
		Name:    "charger-plugged",
		Summary: "the battery drains, then a charger is plugged in at at_ms and it charges",
		Params: []Param{
			{"start_pct", 20, "battery at the start, %"},
			{"at_ms", 5000, "when the charger is plugged in, ms"},
			{"drain_pct_per_min", 1, "discharge rate before, %/min"},
			{"charge_pct_per_min", 2, "charge rate after, %/min"},
		},
		gen: genChargerPlugged,
	},
	{
		Name:    "memory-oscillate",
		Summary: "available memory oscillates around the low-memory threshold",
		Params: []Param{
			{"total_mb", 4096, "total memory, MiB"},
			{"threshold_mb", 500, "low-memory threshold, MiB"},
			{"amplitude_mb", 200, "oscillation amplitude, MiB"},
			{"period_ms", 2000, "oscillation period, ms"},
			{"noise_mb", 10, "uniform noise, ± MiB"},
		},
		gen: genMemoryOscillate,
	},
}

func genThermalRamp(g *genState) []Record {
	n := g.opts.Steps
	base, peak := g.p["base_c"], g.p["peak_c"]
	peakSt := clamp(math.Round(g.p["peak_status"]), 1, float64(abi.ThermalShutdown))
	hold := clamp(g.p["hold"], 0, 0.9)
	ramp := (1 - hold) / 2
	recs := make([]Record, n)
	for i := range recs {
		x := float64(i) / float64(n-1) // 0..1 through the trace
		var frac float64               // 0 at base, 1 at the peak
		switch {
		case x < ramp:
			frac = x / ramp
		case x <= ramp+hold:
			frac = 1
		default:
			frac = (1 - x) / ramp
		}
		frac = clamp(frac, 0, 1)
		r := &recs[i]
		r.TMs = g.t(i)
		r.Present = abi.PresentTemp | abi.PresentThermalStatus
		r.Values.TempC = float32(base + (peak-base)*frac + g.noise(0.2))
		// Status steps up at equal fractions of the ramp: it is the peak
		// status only at the peak and NONE at the ends.
		r.Values.ThermalStatus = abi.ThermalStatus(math.Floor(frac*peakSt + 1e-9))
	}
	return recs
}

func genBackgroundApp(g *genState) []Record {
	total, avail, thr := g.p["total_mb"], g.p["avail_mb"], g.p["threshold_mb"]
	take, at, ramp, rel := g.p["mb"], g.p["at_ms"], math.Max(g.p["ramp_ms"], 1), g.p["release_ms"]
	recs := make([]Record, g.opts.Steps)
	for i := range recs {
		t := float64(g.t(i))
		taken := take * clamp((t-at)/ramp, 0, 1)
		if rel > 0 && t >= rel {
			taken = take * (1 - clamp((t-rel)/ramp, 0, 1))
		}
		a := clamp(avail-taken+g.noise(8), 0, total)
		// Memory pressure stalls grow as available memory nears the threshold.
		psi := clamp(40*(2*thr-a)/(2*thr), 0, 100)
		r := &recs[i]
		r.TMs = int64(t)
		r.Present = abi.PresentMemAvailable | abi.PresentMemThreshold | abi.PresentMemTotal | abi.PresentLowMemory | abi.PresentPSISome
		r.Values.MemAvailableMB, r.Values.MemThresholdMB, r.Values.MemTotalMB = mb(a), mb(thr), mb(total)
		r.Values.LowMemory = a < thr
		r.Values.PSISomeAvg10 = float32(math.Round(psi*100) / 100)
	}
	return recs
}

func genBatteryDrain(g *genState) []Record {
	n := g.opts.Steps
	start, end := clamp(g.p["start_pct"], 0, 100), clamp(g.p["end_pct"], 0, 100)
	recs := make([]Record, n)
	for i := range recs {
		x := float64(i) / float64(n-1)
		r := &recs[i]
		r.TMs = g.t(i)
		r.Present = abi.PresentBattery | abi.PresentCharging
		r.Values.BatteryPct = float32(math.Round((start+(end-start)*x)*10) / 10)
	}
	return recs
}

func genChargerPlugged(g *genState) []Record {
	start, at := clamp(g.p["start_pct"], 0, 100), g.p["at_ms"]
	drain, charge := g.p["drain_pct_per_min"]/60000, g.p["charge_pct_per_min"]/60000
	recs := make([]Record, g.opts.Steps)
	atPct := clamp(start-drain*at, 0, 100)
	for i := range recs {
		t := float64(g.t(i))
		pct := clamp(start-drain*t, 0, 100)
		plugged := t >= at
		if plugged {
			pct = clamp(atPct+charge*(t-at), 0, 100)
		}
		r := &recs[i]
		r.TMs = int64(t)
		r.Present = abi.PresentBattery | abi.PresentCharging
		r.Values.BatteryPct = float32(math.Round(pct*100) / 100)
		r.Values.Charging = plugged
	}
	return recs
}

func genMemoryOscillate(g *genState) []Record {
	total, thr, amp := g.p["total_mb"], g.p["threshold_mb"], g.p["amplitude_mb"]
	period, nz := math.Max(g.p["period_ms"], 1), math.Max(g.p["noise_mb"], 0)
	recs := make([]Record, g.opts.Steps)
	for i := range recs {
		t := float64(g.t(i))
		a := clamp(thr+amp*math.Sin(2*math.Pi*t/period)+g.noise(nz), 0, total)
		r := &recs[i]
		r.TMs = int64(t)
		r.Present = abi.PresentMemAvailable | abi.PresentMemThreshold | abi.PresentMemTotal | abi.PresentLowMemory
		r.Values.MemAvailableMB, r.Values.MemThresholdMB, r.Values.MemTotalMB = mb(a), mb(thr), mb(total)
		r.Values.LowMemory = a < thr
	}
	return recs
}
