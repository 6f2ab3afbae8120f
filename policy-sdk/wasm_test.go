//go:build !wasip1

package sdk_test

import (
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/edgellm/edgellm/abi"
	sdk "github.com/edgellm/edgellm/policy-sdk"
	"github.com/edgellm/edgellm/policy-sdk/internal/wasmbuild"
)

// guest is the probe policy instantiated in wazero (compiler mode), called
// exactly as the ABI says: write Sensors at in_ptr, pre-fill the Decision at
// out_ptr, call decide, read the Decision.
type guest struct {
	rt      wazero.Runtime
	mod     api.Module
	mem     api.Memory
	decide  api.Function
	in, out uint32
	stack   []uint64
}

func newGuest(t testing.TB) *guest {
	t.Helper()
	path, err := wasmbuild.Build("testdata/probe", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g := &guest{rt: wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler()), stack: make([]uint64, 1)}
	t.Cleanup(func() { g.rt.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, g.rt)
	g.mod, err = g.rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithStartFunctions(abi.ExportInitialize))
	if err != nil {
		t.Fatal(err)
	}
	g.mem = g.mod.ExportedMemory(abi.ExportMemory)
	if g.mem == nil {
		t.Fatal("no memory export")
	}
	call0 := func(name string) uint32 {
		fn := g.mod.ExportedFunction(name)
		if fn == nil {
			t.Fatalf("missing export %s", name)
		}
		r, err := fn.Call(ctx)
		if err != nil || len(r) != 1 {
			t.Fatalf("%s: %v %v", name, r, err)
		}
		return uint32(r[0])
	}
	if major, minor := call0(abi.ExportVersionMajor), call0(abi.ExportVersionMinor); major != abi.VersionMajor || minor != abi.VersionMinor {
		t.Fatalf("guest ABI %d.%d, want %v", major, minor, abi.Current())
	}
	g.in, g.out = call0(abi.ExportInPtr), call0(abi.ExportOutPtr)
	g.decide = g.mod.ExportedFunction(abi.ExportDecide)
	if g.decide == nil {
		t.Fatal("missing export decide")
	}
	return g
}

// call runs one decide; d is the pre-fill in and the result out.
func (g *guest) call(t testing.TB, s *abi.Sensors, d *abi.Decision) abi.Status {
	in, ok1 := g.mem.Read(g.in, abi.SensorsSize)
	out, ok2 := g.mem.Read(g.out, abi.DecisionSize)
	if !ok1 || !ok2 {
		t.Fatal("buffers out of guest memory")
	}
	if err := abi.EncodeSensors(in, s); err != nil {
		t.Fatal(err)
	}
	if err := abi.EncodeDecision(out, d); err != nil {
		t.Fatal(err)
	}
	if err := g.decide.CallWithStack(context.Background(), g.stack); err != nil {
		t.Fatalf("decide trapped: %v", err)
	}
	st := abi.Status(int32(uint32(g.stack[0])))
	if err := abi.DecodeDecision(out, d); err != nil {
		t.Fatal(err)
	}
	return st
}

func probeSensors(step uint64) abi.Sensors {
	s := abi.Sensors{
		Present: abi.PresentCurrent | abi.PresentMemAvailable, Step: step,
		MemAvailableMB: int32(1000 + step), ThermalStatus: abi.ThermalSevere,
		TrimLevel: abi.TrimRunningLow, CurTier: 1, CurKVType: abi.KVQ8_0, LowMemory: step%2 == 1,
	}
	for i := range s.CurLayerBits {
		s.CurLayerBits[i] = uint8(i % 8)
		s.LayerLatencyUS[i] = float32(i) + float32(step)
	}
	return s
}

// TestWasmMatchesNative: the same Decide gives the same Decision natively
// (through sdk.Call) and as .wasm, including the panic path.
func TestWasmMatchesNative(t *testing.T) {
	g := newGuest(t)
	for step := uint64(0); step < 5; step++ {
		s := probeSensors(step)
		var dw, dn abi.Decision
		dw.Window, dn.Window = 77, 77
		if st := g.call(t, &s, &dw); st != abi.StatusOK {
			t.Fatalf("wasm status %v", st)
		}
		// Native: run the same package's Decide through sdk.Call.
		in, out := make([]byte, abi.SensorsSize), make([]byte, abi.DecisionSize)
		_ = abi.EncodeSensors(in, &s)
		_ = abi.EncodeDecision(out, &dn)
		var x sdk.Exchange
		if st := sdk.Call(probeDecide, &x, in, out); st != abi.StatusOK {
			t.Fatalf("native status %v", st)
		}
		_ = abi.DecodeDecision(out, &dn)
		dn.Threads = int32(step + 1) // the probe's call counter (package state in the guest)
		if !reflect.DeepEqual(dw, dn) {
			t.Fatalf("step %d: wasm and native differ\nwasm   %+v\nnative %+v", step, dw, dn)
		}
	}
	s := probeSensors(9)
	s.CtxLen = -7
	var d abi.Decision
	if st := g.call(t, &s, &d); st != abi.StatusPanic || d.ReasonCode != abi.ReasonGuestPanic || d.Reason() != "panic: probe: asked to panic" {
		t.Fatalf("panic: status %v reason %d %q", st, d.ReasonCode, d.Reason())
	}
}

// probeDecide mirrors testdata/probe's Decide minus its call counter (a copy:
// package main cannot be imported).
func probeDecide(s *abi.Sensors, d *abi.Decision) {
	d.Tier = s.CurTier + 1
	d.SpecK = int32(s.Step % 9)
	d.Window = s.MemAvailableMB
	d.Anchors = int32(s.ThermalStatus)
	d.CadenceSteps = int32(s.TrimLevel)
	d.KVType = s.CurKVType
	for i := range d.LayerBits {
		d.LayerBits[i] = s.CurLayerBits[i] + 1
		d.LayerWindowScale[i] = s.LayerLatencyUS[i] / 2
	}
	if s.LowMemory {
		d.SetReason(abi.ReasonLowMemory, "low memory")
	} else {
		d.SetReason(abi.ReasonPolicy, "probe")
	}
}

// TestWasmMemoryStable is the Go-guest garbage pitfall guard: decide runs
// many times and the guest's linear memory must not grow after warm-up.
// 1,000,000 calls (about 7 s here); 100,000 with -short; 10,000,000 with
// EDGELLM_SOAK=1.
func TestWasmMemoryStable(t *testing.T) {
	n := 1_000_000
	switch {
	case os.Getenv("EDGELLM_SOAK") == "1":
		n = 10_000_000
	case testing.Short():
		n = 100_000
	}
	g := newGuest(t)
	var d abi.Decision
	s := probeSensors(0)
	for i := 0; i < 1000; i++ { // warm-up
		s.Step = uint64(i)
		g.call(t, &s, &d)
	}
	before := g.mem.Size()
	start := time.Now()
	for i := 0; i < n; i++ {
		s.Step = uint64(i)
		s.LowMemory = i%3 == 0
		if st := g.call(t, &s, &d); st != abi.StatusOK {
			t.Fatalf("call %d: status %v", i, st)
		}
	}
	el := time.Since(start)
	after := g.mem.Size()
	t.Logf("%d calls in %v (%.2f µs/call incl. host encode/decode); linear memory %d → %d bytes",
		n, el, float64(el.Microseconds())/float64(n), before, after)
	if after != before {
		t.Fatalf("guest linear memory grew from %d to %d bytes over %d calls", before, after, n)
	}
	if d.Threads != int32(n+1000) {
		t.Fatalf("probe call counter = %d, want %d (state across calls)", d.Threads, n+1000)
	}
}
