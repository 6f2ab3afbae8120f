package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/cputime"
)

// Modules refused at load: the current policy (good_a) keeps deciding.
func TestHostileLoadRefused(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.wasm")
	if err := os.WriteFile(big, bigModule(t, 50<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(t.TempDir(), "junk.wasm")
	if err := os.WriteFile(junk, []byte("#!/bin/sh\necho this is not wasm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		path    string
		kind    error
		message string
	}{
		{"wrong ABI major", fixture(t, "abi2"), ErrABIVersion, "module speaks ABI 2.0, this host speaks 1.x"},
		{"missing exports", fixture(t, "missing_exports"), ErrModule, `missing export "decide"`},
		{"unknown host imports", fixture(t, "bad_import"), ErrUnknownImport, "env.steal_keys, wasi_snapshot_preview1.no_such_call"},
		{"start never returns", fixture(t, "start_loop"), ErrInstantiate, "start function did not return within"},
		{"_initialize never returns", fixture(t, "init_loop"), ErrInstantiate, "_initialize did not return within"},
		{"in_ptr outside memory", fixture(t, "bad_ptr"), ErrModule, "in_ptr 65000 + 768 bytes is outside memory"},
		{"50 MB module", big, ErrBundleTooLarge, "limit 16777216"},
		{"not wasm", junk, ErrNotPolicy, "neither Wasm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRuntime(t, testConfig().WithInitTimeout(200*time.Millisecond))
			if err := r.LoadFile(context.Background(), fixture(t, "good_a")); err != nil {
				t.Fatal(err)
			}
			err := r.LoadFile(context.Background(), tc.path)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %v; want %v containing %q", err, tc.kind, tc.message)
			}
			if d := decideOK(t, r); d.Tier != 1 {
				t.Fatalf("after refused load: tier %d, want good_a's 1", d.Tier)
			}
			if st := r.Stats(); st.LoadErrors != 1 || st.Generation != 1 {
				t.Fatalf("stats %+v: want 1 load error, generation 1", st)
			}
		})
	}
}

// The 50 MB module itself is a valid policy: with the limit raised it loads.
func TestBigModuleLoadsWhenAllowed(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.wasm")
	if err := os.WriteFile(big, bigModule(t, 50<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, testConfig().WithBundleLimits(BundleLimits{MaxFileBytes: 64 << 20, MaxTotalBytes: 64 << 20, MaxEntries: 8}))
	if err := r.LoadFile(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	if d := decideOK(t, r); d.Tier != 1 {
		t.Fatalf("tier %d, want 1", d.Tier)
	}
}

// bigModule is good_a.wasm plus a custom section making it size bytes.
func bigModule(t testing.TB, size int) []byte {
	wasm, err := os.ReadFile(fixture(t, "good_a"))
	if err != nil {
		t.Fatal(err)
	}
	name := "edgellm.padding"
	payload := size - len(wasm) - 1 - 5 - 5 - len(name)
	out := append([]byte(nil), wasm...)
	out = append(out, 0) // custom section id
	out = appendLEB(out, uint32(5+len(name)+payload))
	out = appendLEB(out, uint32(len(name)))
	out = append(out, name...)
	return append(out, make([]byte, payload)...)
}

// appendLEB appends v as a 5-byte (padded) unsigned LEB128.
func appendLEB(b []byte, v uint32) []byte {
	for i := 0; i < 4; i++ {
		b = append(b, byte(v&0x7f)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// Modules that fail while running: a loop of 10 000 decisions completes,
// every step answers, the right fallback is taken, failures are counted, and
// nothing leaks.
func TestHostileDecide(t *testing.T) {
	steps := 10000
	if testing.Short() {
		steps = 2000
	}
	for _, tc := range []struct {
		name        string
		fixture     string
		outcome     Outcome // the first failure (for the grow bomb: trap or deadline)
		quarantined bool    // quarantined (K consecutive failures) → default decisions
		minOK       int     // steps that must be decided by the module
	}{
		{"infinite loop", "loop", OutcomeDeadline, true, 0},
		{"call tree without loops", "recurse", OutcomeDeadline, true, 0},
		{"infinite loop, not instrumented", "loop_reserved", OutcomeDeadline, true, 0},
		{"immediate trap", "trap", OutcomeTrap, true, 0},
		{"trap after 5 calls", "trap_after", OutcomeTrap, false, steps / 2},
		{"memory.grow bomb", "grow", OutcomeTrap, true, 0},
		{"garbage decision", "garbage", OutcomeInvalid, true, 0},
		{"bad header", "bad_header", OutcomeInvalid, true, 0},
		{"bad status", "bad_status", OutcomeBadStatus, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			g0 := runtime.NumGoroutine()
			r, err := NewRuntime(ctx, testConfig().WithDeadline(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			// A good module first, so there is a last good decision and a
			// previous module to restore.
			if err := r.LoadFile(ctx, fixture(t, "good_a")); err != nil {
				t.Fatal(err)
			}
			lastOK := decideOK(t, r)
			if err := r.LoadFile(ctx, fixture(t, tc.fixture)); err != nil {
				t.Fatal(err)
			}
			heap0, rss0 := memUsage()
			var first Outcome
			ok := 0
			start := time.Now()
			for i := 0; i < steps; i++ {
				s, d := testSensors(), current()
				runtime.LockOSThread()
				c0 := cputime.Thread()
				res, err := r.Decide(ctx, &s, &d)
				used := cputime.Thread() - c0
				runtime.UnlockOSThread()
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case res.Outcome == OutcomeOK:
					ok++
					lastOK = d
				case res.Fallback != FallbackLastGood || d != lastOK:
					t.Fatalf("step %d (%v): fallback %v decision %+v; want the last good decision %+v", i, res.Outcome, res.Fallback, d, lastOK)
				case first == OutcomeOK && res.Outcome.Failed():
					first = res.Outcome
				}
				// Bounded in the calling thread's CPU time: on a loaded
				// machine the wall time of a step also counts the time
				// other processes had the CPU.
				if used > stepBound(tc.fixture) {
					t.Fatalf("step %d took %v of CPU (%v of wall time)", i, used, res.Latency)
				}
				if res.Outcome == OutcomeRecovering {
					time.Sleep(20 * time.Microsecond) // a decode step's worth of time
				}
			}
			elapsed := time.Since(start)
			st := r.Stats()
			heap1, rss1 := memUsage()
			t.Logf("%d steps in %v: first failure %v, ok %d, stats %+v, heap %+d KiB, RSS %+d KiB",
				steps, elapsed, first, ok, st, (int64(heap1)-int64(heap0))>>10, (rss1-rss0)>>10)
			if first != tc.outcome && !(tc.fixture == "grow" && first == OutcomeDeadline) {
				t.Errorf("first failure %v, want %v", first, tc.outcome)
			}
			if st.Failures == 0 || st.Steps != uint64(steps)+1 {
				t.Errorf("stats %+v: want failures > 0 and %d steps", st, steps+1)
			}
			if tc.quarantined {
				// K failures quarantine the module (a restored good module
				// may still overrun once on a loaded machine).
				if st.Quarantines != 1 || st.Failures < uint64(r.cfg.maxFailures) {
					t.Errorf("quarantines %d failures %d; want 1 and ≥ K=%d", st.Quarantines, st.Failures, r.cfg.maxFailures)
				}
				// good_a is restored: the module decides again.
				if ok < steps/2 || !strings.HasPrefix(r.Module(), "good_a.wasm") {
					t.Errorf("after quarantine: %d/%d ok, module %q; want good_a restored", ok, steps, r.Module())
				}
			} else if ok < tc.minOK || st.Reinstantiations == 0 {
				t.Errorf("ok %d (want ≥ %d), reinstantiations %d", ok, tc.minOK, st.Reinstantiations)
			}
			if err := r.Close(ctx); err != nil {
				t.Fatal(err)
			}
			// Bounds: the guest memory limit is 16 MiB; instances are closed.
			if d := int64(heap1) - int64(heap0); d > 32<<20 {
				t.Errorf("Go heap grew by %d MiB over %d steps", d>>20, steps)
			}
			if d := rss1 - rss0; d > 96<<20 {
				t.Errorf("RSS grew by %d MiB over %d steps", d>>20, steps)
			}
			waitFor(t, 5*time.Second, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= g0+1 })
		})
	}
}

// Out-of-range decisions are clamped, each clamp reported.
func TestOutOfRangeClamped(t *testing.T) {
	r := newRuntime(t, testConfig())
	if err := r.LoadFile(context.Background(), fixture(t, "out_of_range")); err != nil {
		t.Fatal(err)
	}
	s, d := testSensors(), current()
	res, err := r.Decide(context.Background(), &s, &d)
	if err != nil || res.Outcome != OutcomeOK {
		t.Fatalf("res %+v err %v", res, err)
	}
	want := abi.Decision{Tier: 3, SpecK: 8, Window: 512, Anchors: 512, Threads: 4, CadenceSteps: 64, KVType: abi.KVF16, ReasonCode: 0}
	want.LayerBits[0], want.LayerBits[1] = 8, 2
	want.LayerWindowScale[0] = 1
	if d != want {
		t.Fatalf("clamped decision\n got %+v\nwant %+v", d, want)
	}
	all := ClampTier | ClampSpecK | ClampWindow | ClampAnchors | ClampThreads | ClampCadence | ClampKVType | ClampLayerBits | ClampLayerWindowScale
	if res.Clamps != all {
		t.Fatalf("clamps %v, want %v", res.Clamps, all)
	}
	if r.Stats().Clamped != 1 {
		t.Fatal("clamped decision not counted")
	}
}

// memUsage returns the Go heap in use (after GC) and the process RSS.
func memUsage() (heap uint64, rss int64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	data, _ := os.ReadFile("/proc/self/statm")
	if f := strings.Fields(string(data)); len(f) > 1 {
		pages, _ := strconv.ParseInt(f[1], 10, 64)
		rss = pages * int64(os.Getpagesize())
	}
	return ms.HeapInuse, rss
}

// stepBound is the CPU time one Decide of a hostile fixture may take: 200 ms
// (20 deadlines of the test's 10 ms), and for the grow bomb also the memory
// it moves: it grows by 1 MiB per iteration up to the page limit, each grow
// copying the memory so far and zeroing the new MiB, Σ_{i=1..16} i MiB =
// 136 MiB at the default 16 MiB, charged at 250 MB/s (a floor for a
// memory-bound copy on a machine whose bandwidth other jobs share: one run
// of the full suite measured 228 ms of CPU for this step, 2-core VM).
func stepBound(fixture string) time.Duration {
	b := 200 * time.Millisecond
	if fixture == "grow" {
		mib := int64(DefaultMemoryLimitPages) * 64 << 10 >> 20
		moved := mib * (mib + 1) / 2 << 20
		b += time.Duration(moved * int64(time.Second) / 250e6)
	}
	return b
}
