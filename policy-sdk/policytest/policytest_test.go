package policytest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/abi"
)

func writeTrace(t *testing.T, lines string) string {
	p := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(p, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSourceTrace: records overlay Base and carry fields forward; Step counts calls.
func TestSourceTrace(t *testing.T) {
	c := &Case{
		Name:  "x",
		Trace: writeTrace(t, `{"t_ms":0,"mem_available_mb":900,"thermal_status":2}`+"\n"+`{"t_ms":10,"thermal_status":3}`+"\n"),
		Base:  abi.Sensors{Present: abi.PresentTiers, TiersAvailable: 3},
	}
	src := newSource(t, c)
	if src.len() != 2 {
		t.Fatalf("len %d", src.len())
	}
	var s abi.Sensors
	src.next(&s)
	src.next(&s)
	if s.Step != 1 || s.TimeNS != 10e6 || s.MemAvailableMB != 900 || s.ThermalStatus != 3 || s.TiersAvailable != 3 ||
		!s.Has(abi.PresentMemAvailable|abi.PresentThermalStatus|abi.PresentTiers) || s.Has(abi.PresentTemp) {
		t.Fatalf("second step sensors: %+v", s)
	}
}

// TestSourceSteps: Steps get Base's engine facts unless they carry their own.
func TestSourceSteps(t *testing.T) {
	base := abi.Sensors{Present: abi.PresentTiers | abi.PresentLayerLatency, TiersAvailable: 4, LayerCount: 2}
	c := &Case{Name: "x", Base: base, Steps: []abi.Sensors{{}, {Present: abi.PresentTiers, TiersAvailable: 7}}}
	src := newSource(t, c)
	var s abi.Sensors
	src.next(&s)
	if s.TiersAvailable != 4 || s.LayerCount != 2 || s.Step != 0 {
		t.Fatalf("step 0: %+v", s)
	}
	src.next(&s)
	if s.TiersAvailable != 7 || s.LayerCount != 2 || s.Step != 1 {
		t.Fatalf("step 1: %+v", s)
	}
}

// TestEngineApply: zero means "leave as is" for bits, scales, KV type and threads.
func TestEngineApply(t *testing.T) {
	e := engineState{cur: abi.Decision{Tier: 1, Threads: 4, KVType: abi.KVF16}}
	e.cur.LayerBits[0], e.cur.LayerBits[1] = 8, 8
	d := abi.Decision{Tier: 2, SpecK: 3}
	d.LayerBits[1] = 4
	e.apply(&d)
	if e.cur.Tier != 2 || e.cur.SpecK != 3 || e.cur.Threads != 4 || e.cur.KVType != abi.KVF16 || e.cur.LayerBits[0] != 8 || e.cur.LayerBits[1] != 4 {
		t.Fatalf("engine state %+v", e.cur)
	}
	var s abi.Sensors
	e.report(&s)
	if !s.Has(abi.PresentCurrent) || s.CurTier != 2 || s.CurSpecK != 3 || s.CurLayerBits[1] != 4 || s.CurKVType != abi.KVF16 {
		t.Fatalf("reported %+v", s)
	}
}

func feedbackCases(t *testing.T) []Case {
	steps := make([]abi.Sensors, 10)
	for i := range steps {
		steps[i] = abi.Sensors{Present: abi.PresentMemAvailable, MemAvailableMB: int32(100 * i)}
	}
	check := func(t *testing.T, k int, s *abi.Sensors, d *abi.Decision) {
		if d.Tier != int32(k+1) || s.CurTier != int32(k) {
			t.Errorf("step %d: cur tier %d → %d, want %d → %d (decisions fed back)", k, s.CurTier, d.Tier, k, k+1)
		}
		if d.Window != s.MemAvailableMB {
			t.Errorf("step %d: window %d, want %d", k, d.Window, s.MemAvailableMB)
		}
	}
	return []Case{
		{Name: "steps", Steps: steps, Base: abi.Sensors{Present: abi.PresentTiers, TiersAvailable: 100}, AllowClamps: true, Check: check},
		{Name: "trace", Trace: writeTrace(t, `{"t_ms":0,"mem_available_mb":0}`+"\n"+`{"t_ms":1,"mem_available_mb":100}`+"\n"),
			Base: abi.Sensors{Present: abi.PresentTiers, TiersAvailable: 100}, AllowClamps: true, Check: check,
			After: func(t *testing.T, steps []Step) {
				if len(steps) != 2 {
					t.Errorf("%d steps, want 2", len(steps))
				}
			}},
	}
}

// probe mirrors the tier and window behaviour of ../testdata/probe.
func probe(s *abi.Sensors, d *abi.Decision) {
	d.Tier = s.CurTier + 1
	d.Window = s.MemAvailableMB
}

func TestRunNative(t *testing.T) {
	resets := 0
	RunNative(t, probe, feedbackCases(t), WithReset(func() { resets++ }))
	if resets != 2 {
		t.Errorf("reset called %d times, want once per case", resets)
	}
}

func TestRunWasm(t *testing.T) {
	RunWasm(t, Build(t, "../testdata/probe"), feedbackCases(t))
}

func TestLimitsFor(t *testing.T) {
	c := &Case{Base: abi.Sensors{TiersAvailable: 3, LayerCount: 6}, Start: abi.Decision{Threads: 64}}
	l := limitsFor(c)
	if l.NTiers != 3 || l.NLayers != 6 || l.MaxThreads != 64 || l.MaxWindow != 4096 {
		t.Fatalf("limits %+v", l)
	}
}

// TestPrebuilt: EDGELLM_POLICY_WASM replaces a plain Build of the package
// under test (the working directory) and nothing else.
func TestPrebuilt(t *testing.T) {
	mod := filepath.Join(t.TempDir(), "policy.wasm")
	if err := os.WriteFile(mod, []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     string
		dir     string
		args    []string
		want    bool
		wantErr bool
	}{
		{name: "unset", dir: "."},
		{name: "package under test", env: mod, dir: ".", want: true},
		{name: "same dir spelled differently", env: mod, dir: "../policytest", want: true},
		{name: "another dir", env: mod, dir: "../testdata/probe"},
		{name: "extra build flags", env: mod, dir: ".", args: []string{"-ldflags=-X main.x=1"}},
		{name: "missing file", env: mod + ".missing", dir: ".", wantErr: true},
		{name: "a directory", env: t.TempDir(), dir: ".", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvWasm, tc.env)
			p, ok, err := prebuilt(tc.dir, tc.args)
			if (err != nil) != tc.wantErr || ok != tc.want || (ok && p != tc.env) {
				t.Fatalf("prebuilt = %q, %v, %v; want ok %v, error %v", p, ok, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestRunWasmPrebuilt runs RunWasm(t, Build(t, "."), …) as a policy's test
// does under `edgellm policy test`: the module comes from the environment.
func TestRunWasmPrebuilt(t *testing.T) {
	mod := Build(t, "../testdata/probe")
	t.Setenv(EnvWasm, mod)
	p := Build(t, ".") // "." is not package main: building it would fail
	if p != mod {
		t.Fatalf("Build(\".\") = %s, want %s", p, mod)
	}
	RunWasm(t, p, feedbackCases(t))
}
