//go:build !wasip1

package sdk_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/wasmbuild"
	sdk "github.com/edgellm/edgellm/policy-sdk"
)

// guest is a test policy instantiated in wazero (compiler mode), called
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

// newGuest builds testdata/probe and instantiates it.
func newGuest(t testing.TB) *guest { return newGuestFrom(t, "testdata/probe", false) }

// newGuestFrom builds the policy in dir with the extra go build args and
// instantiates it; deadline compiles it as the host does with a per-call
// deadline (wazero's termination check at every loop back-edge).
func newGuestFrom(t testing.TB, dir string, deadline bool, args ...string) *guest {
	t.Helper()
	path, err := wasmbuild.Build(dir, t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(deadline)
	g := &guest{rt: wazero.NewRuntimeWithConfig(ctx, cfg), stack: make([]uint64, 1)}
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

// export32 calls an exported func() int32 of the guest.
func (g *guest) export32(t testing.TB, name string) uint32 {
	t.Helper()
	fn := g.mod.ExportedFunction(name)
	if fn == nil {
		t.Fatalf("missing export %s", name)
	}
	r, err := fn.Call(context.Background())
	if err != nil || len(r) != 1 {
		t.Fatalf("%s: %v %v", name, r, err)
	}
	return uint32(r[0])
}

// rawWire returns n random bytes under a valid 1.0 header of size n; one
// call in eight breaks the major or the size.
func rawWire(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for range r.IntN(8) {
		b[r.IntN(n)] = byte(r.IntN(2)) // bools and small values
	}
	binary.LittleEndian.PutUint16(b[0:], abi.VersionMajor)
	binary.LittleEndian.PutUint16(b[2:], abi.VersionMinor)
	binary.LittleEndian.PutUint32(b[4:], uint32(n))
	switch r.IntN(16) {
	case 0:
		b[0] = 7
	case 1:
		b[4]++
	}
	return b
}

// canonical decodes and re-encodes with abi's reference codec: what a guest
// must have seen, as bytes (floats by bits, bools as 0/1, reason text
// clamped). ok is false when abi refuses the buffer.
func canonicalSensors(raw []byte) ([]byte, bool) {
	var s abi.Sensors
	if abi.DecodeSensors(raw, &s) != nil {
		return nil, false
	}
	b := make([]byte, abi.SensorsSize)
	_ = abi.EncodeSensors(b, &s)
	return b, true
}

func canonicalDecision(raw []byte) ([]byte, bool) {
	var d abi.Decision
	if abi.DecodeDecision(raw, &d) != nil {
		return nil, false
	}
	b := make([]byte, abi.DecisionSize)
	_ = abi.EncodeDecision(b, &d)
	return b, true
}

// TestWasmRoundTrip writes random wire bytes (NaN payloads, bools that are
// neither 0 nor 1, reason lengths past 48, garbage in reserved bytes, and
// now and then a broken header) into the guest's buffers and checks, call by
// call, that the guest saw exactly the values abi's reference decoder reads
// (the echo policy re-encodes them with abi's encoder), that the Decision it
// returns is exactly the reference encoding of the one it was given, and
// that status and output equal sdk.Call's natively.
func TestWasmRoundTrip(t *testing.T) {
	g := newGuestFrom(t, "testdata/echo", true)
	seenS, seenD := g.export32(t, "seen_sensors_ptr"), g.export32(t, "seen_decision_ptr")

	var x sdk.Exchange
	var nativeSeenS, nativeSeenD []byte
	echo := func(s *abi.Sensors, d *abi.Decision) {
		nativeSeenS, nativeSeenD = make([]byte, abi.SensorsSize), make([]byte, abi.DecisionSize)
		_ = abi.EncodeSensors(nativeSeenS, s)
		_ = abi.EncodeDecision(nativeSeenD, d)
	}
	r := rand.New(rand.NewPCG(5, 6))
	n, ok := 5000, 0
	if testing.Short() {
		n = 500
	}
	for i := range n {
		rs, rd := rawWire(r, abi.SensorsSize), rawWire(r, abi.DecisionSize)
		// Views of guest memory, taken anew: the error paths allocate in the
		// guest, and a memory.grow moves the host's view of it.
		in, _ := g.mem.Read(g.in, abi.SensorsSize)
		out, _ := g.mem.Read(g.out, abi.DecisionSize)
		gotS, _ := g.mem.Read(seenS, abi.SensorsSize)
		gotD, _ := g.mem.Read(seenD, abi.DecisionSize)
		copy(in, rs)
		copy(out, rd)
		clear(gotS)
		clear(gotD)
		if err := g.decide.CallWithStack(context.Background(), g.stack); err != nil {
			t.Fatalf("call %d: decide trapped: %v", i, err)
		}
		st := abi.Status(int32(uint32(g.stack[0])))
		out, _ = g.mem.Read(g.out, abi.DecisionSize)
		gotS, _ = g.mem.Read(seenS, abi.SensorsSize)
		gotD, _ = g.mem.Read(seenD, abi.DecisionSize)

		// The native run of the same bytes through sdk.Call.
		nin, nout := bytes.Clone(rs), bytes.Clone(rd)
		nativeSeenS, nativeSeenD = nil, nil
		nst := sdk.Call(echo, &x, nin, nout)
		if st != nst || !bytes.Equal(out, nout) {
			t.Fatalf("call %d: wasm status %v, native %v; outputs equal: %v", i, st, nst, bytes.Equal(out, nout))
		}

		wantS, okS := canonicalSensors(rs)
		wantD, okD := canonicalDecision(rd)
		switch {
		case !okS:
			if st != abi.StatusBadSensors {
				t.Fatalf("call %d: status %v for a broken Sensors header, want %v", i, st, abi.StatusBadSensors)
			}
			continue
		case !okD:
			if st != abi.StatusBadDecision {
				t.Fatalf("call %d: status %v for a broken Decision header, want %v", i, st, abi.StatusBadDecision)
			}
			continue
		case st != abi.StatusOK:
			t.Fatalf("call %d: status %v", i, st)
		}
		ok++
		if !bytes.Equal(gotS, wantS) || !bytes.Equal(nativeSeenS, wantS) {
			t.Fatalf("call %d: the guest saw other Sensors than sent: differ at wire offset %d", i, diffAt(gotS, wantS))
		}
		if !bytes.Equal(gotD, wantD) || !bytes.Equal(nativeSeenD, wantD) {
			t.Fatalf("call %d: the guest saw another Decision than sent: differ at wire offset %d", i, diffAt(gotD, wantD))
		}
		if !bytes.Equal(out, wantD) {
			t.Fatalf("call %d: the unchanged Decision came back different from wire offset %d", i, diffAt(out, wantD))
		}
	}
	if ok < n/2 {
		t.Fatalf("only %d of %d calls had valid headers", ok, n)
	}
	t.Logf("%d calls, %d with valid headers, guest and native agree byte for byte", n, ok)
}

func diffAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
