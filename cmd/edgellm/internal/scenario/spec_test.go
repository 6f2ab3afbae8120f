package scenario

import (
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/trace"
)

const goodSpec = `
name: t
model: {tiers: [a.gguf, b.gguf]}
n: 32
policies: [{name: d, builtin: default}]
memory: {limit_mb: 100, hog: {at_token: 4, mb: 10}}
`

func TestParse(t *testing.T) {
	s, err := Parse(strings.NewReader(goodSpec), "/x")
	if err != nil {
		t.Fatal(err)
	}
	if s.Threads != 1 || s.Ctx != 512 || len(s.Memory.Hogs) != 1 || s.Memory.Hog != nil || s.path("a.gguf") != "/x/a.gguf" {
		t.Errorf("defaults/hog shorthand not applied: %+v %+v", s, s.Memory)
	}
}

// A cpu section parses; its phase positions are its events and n-1.
func TestParseCPU(t *testing.T) {
	spec := strings.Replace(goodSpec, "memory: {limit_mb: 100, hog: {at_token: 4, mb: 10}}", "cpu: {hogs: [{at_token: 4, until_token: 20}, {at_token: 10, threads: 1}]}", 1)
	s, err := Parse(strings.NewReader(spec), "/x")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CPU.positions(s.N); !slices.Equal(got, []int{0, 4, 10, 20, 31}) {
		t.Errorf("positions %v, want [0 4 10 20 31]", got)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, edit, want string
	}{
		{"unknown top key", "n: 32\nmodle: 1", "field modle not found"},
		{"unknown nested key", "memory: {limit_mb: 100, hogz: []}", "field hogz not found"},
		{"malformed n", "n: lots", "cannot unmarshal"},
		{"bad name", "name: a/b", `name "a/b"`},
		{"n too big for ctx", "n: 600", "does not fit in ctx"},
		{"no policies", "policies: []", "at least one"},
		{"wasm and builtin", "policies: [{name: d, builtin: default, wasm: x.wasm}]", "exactly one of wasm or builtin"},
		{"duplicate policy", "policies: [{name: d, builtin: default}, {name: d, builtin: static}]", "used twice"},
		{"one tier", "model: {tiers: [a.gguf]}", "at least 2 files"},
		{"tiers and synth", "model: {tiers: [a, b], synth: {shape: tiny, types: [q8_0, q4_0]}}", "exactly one of tiers or synth"},
		{"bad synth type", "model: {synth: {shape: tiny, types: [q8_0, q9_9]}}", "model.synth.types"},
		{"bad shape", "model: {synth: {shape: huge, types: [q8_0, q4_0]}}", `shape "huge"`},
		{"low limit", "memory: {limit_mb: 1}", "memory.limit_mb 1"},
		{"hog both triggers", "memory: {limit_mb: 100, hog: {at_ms: 1, at_token: 2, mb: 10}}", "exactly one of at_ms or at_token"},
		{"hog after n", "memory: {limit_mb: 100, hog: {at_token: 40, mb: 10}}", "at_token 40"},
		{"hog size", "memory: {limit_mb: 100, hog: {at_token: 1, mb: 0}}", "mb 0"},
		{"no pressure", "memory: null", "no pressure"},
		{"thermal at_ms", "memory: null\nthermal: {schedule: [{at_ms: 100, cpus: 0.5, status: severe}]}", "at_ms is not supported"},
		{"thermal status", "memory: null\nthermal: {schedule: [{at_token: 1, cpus: 0.5, status: toasty}]}", `status "toasty"`},
		{"thermal order", "memory: null\nthermal: {schedule: [{at_token: 5, status: severe}, {at_token: 5, status: none}]}", "increasing"},
		{"negative quota", "memory: null\nthermal: {schedule: [{at_token: 5, cpus: -1, status: severe}]}", "cpus -1"},
		{"serve max_tokens 0", "serve: {max_tokens: 0}", "serve.max_tokens 0: want 1–32"},
		{"serve max_tokens over n", "serve: {max_tokens: 33}", "serve.max_tokens 33"},
		{"serve unknown key", "serve: {max_token: 3}", "field max_token not found"},
		{"cpu with memory", "cpu: {hogs: [{at_token: 4}]}", "cannot be combined"},
		{"cpu no hogs", "memory: null\ncpu: {hogs: []}", "cpu.hogs: empty"},
		{"cpu hog no token", "memory: null\ncpu: {hogs: [{threads: 1}]}", "at_token is required"},
		{"cpu hog after n", "memory: null\ncpu: {hogs: [{at_token: 32}]}", "at_token 32"},
		{"cpu hog until before at", "memory: null\ncpu: {hogs: [{at_token: 8, until_token: 8}]}", "until_token 8"},
		{"cpu hog threads", "memory: null\ncpu: {hogs: [{at_token: 8, threads: -1}]}", "threads -1"},
		{"repack on llamacpp", "engine: llamacpp\nrepack: true", "repack: true needs the native engine"},
		{"repeats without cpu", "repeats: 3", "only cpu scenarios repeat"},
		{"repeats too many", "memory: null\ncpu: {hogs: [{at_token: 4}]}\nrepeats: 10", "repeats 10: want 1–9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Later keys override earlier ones in the edit: apply it by
			// replacing the keys it sets.
			spec := goodSpec
			for _, line := range strings.Split(tc.edit, "\n") {
				key, _, _ := strings.Cut(line, ":")
				var kept []string
				for _, l := range strings.Split(spec, "\n") {
					if !strings.HasPrefix(l, key+":") {
						kept = append(kept, l)
					}
				}
				spec = strings.Join(kept, "\n") + "\n" + line + "\n"
			}
			_, err := Parse(strings.NewReader(spec), ".")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want it to mention %q\nspec:\n%s", err, tc.want, spec)
			}
		})
	}
	if _, err := Parse(strings.NewReader(""), "."); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file: %v", err)
	}
}

// Memory and thermal pressure in one scenario: simulated, the trace carries
// both (the replayer overlays records, so each field keeps its last value);
// with real pressure only the thermal status (memory is read live).
func TestTraceRecordsBothPressures(t *testing.T) {
	spec := goodSpec + "thermal: {schedule: [{at_token: 8, cpus: 0.5, status: severe}]}\n"
	s, err := Parse(strings.NewReader(spec), "/x")
	if err != nil {
		t.Fatal(err)
	}
	for _, real := range []bool{false, true} {
		r := &runner{s: s, mode: pressureMode{real: real}, tiers: []Tier{{SizeMB: 50}, {SizeMB: 20}}}
		recs, err := r.traceRecords()
		if err != nil {
			t.Fatal(err)
		}
		rep := trace.NewReplayer(recs)
		at := func(tok int64) *abi.Sensors { return rep.At(tok) }
		if st := at(2); st.ThermalStatus != abi.ThermalNone || st.Has(abi.PresentCgroupUsage) == real {
			t.Errorf("real=%v, token 2: %+v", real, st)
		}
		st := at(10)
		if st.ThermalStatus != abi.ThermalSevere {
			t.Errorf("real=%v, token 10: thermal %v, want severe", real, st.ThermalStatus)
		}
		if real {
			if st.Has(abi.PresentCgroupUsage) || st.Has(abi.PresentCgroupLimit) {
				t.Errorf("real pressure: the trace simulates memory readings: %+v", st)
			}
		} else if st.CgroupLimitMB != 100 || st.CgroupUsageMB != 50+simOverheadMB+10 {
			t.Errorf("simulated, token 10: cgroup %d/%d MiB, want %d/100", st.CgroupUsageMB, st.CgroupLimitMB, 50+simOverheadMB+10)
		}
	}
}
