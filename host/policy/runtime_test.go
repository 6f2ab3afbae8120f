package policy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
)

func TestDecideWithoutModuleReturnsDefault(t *testing.T) {
	r := newRuntime(t, testConfig())
	s, d := testSensors(), current()
	d.Tier = 2
	res, err := r.Decide(context.Background(), &s, &d)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OutcomeNoModule || res.Fallback != FallbackDefault || d.Tier != 2 {
		t.Fatalf("res %+v tier %d; want no_module, default fallback, tier kept at 2", res, d.Tier)
	}
}

func TestLoadAndDecide(t *testing.T) {
	for _, tc := range []struct {
		name      string
		path      func(t testing.TB) string
		wantTier  int32
		wantSpecK int32
	}{
		{"wat", func(t testing.TB) string { return fixture(t, "good_a") }, 1, 4},
		{"go", goGuest, 0, 0},
		{"policies/default", defaultPolicy, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRuntime(t, testConfig())
			if err := r.LoadFile(context.Background(), tc.path(t)); err != nil {
				t.Fatal(err)
			}
			d := decideOK(t, r)
			if tc.wantTier >= 0 && (d.Tier != tc.wantTier || d.SpecK != tc.wantSpecK || d.KVType != abi.KVF16) {
				t.Fatalf("decision tier %d k %d kv %v; want %d %d f16 (pre-filled)", d.Tier, d.SpecK, d.KVType, tc.wantTier, tc.wantSpecK)
			}
			if r.Generation() != 1 || r.Module() == "" {
				t.Fatalf("generation %d module %q", r.Generation(), r.Module())
			}
		})
	}
}

func TestGoGuestFollowsSensors(t *testing.T) {
	r := newRuntime(t, testConfig())
	if err := r.LoadFile(context.Background(), goGuest(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mem  int32
		tier int32
	}{{4000, 0}, {500, 2}, {999, 2}, {1000, 0}} {
		s, d := testSensors(), current()
		s.MemAvailableMB = tc.mem
		res, err := r.Decide(context.Background(), &s, &d)
		if err != nil || res.Outcome != OutcomeOK || d.Tier != tc.tier {
			t.Errorf("mem %d: res %+v err %v tier %d; want tier %d", tc.mem, res, err, d.Tier, tc.tier)
		}
	}
}

func TestNewRuntimeRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"negative deadline", NewConfig().WithDeadline(-1)},
		{"zero pages", NewConfig().WithMemoryLimitPages(0)},
		{"zero failures", NewConfig().WithMaxFailures(0)},
		{"K above 16", NewConfig().WithLimits(Limits{NTiers: 1, NLayers: 1, MaxK: 17, MaxWindow: 1, MaxThreads: 1, MaxCadence: 1})},
		{"short key", NewConfig().WithTrustedKey(make([]byte, 5))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRuntime(context.Background(), tc.cfg.WithCacheDir("-"))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *ConfigError", err)
			}
		})
	}
}

func TestCompilationCacheDir(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		r, err := NewRuntime(ctx, testConfig().WithCacheDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.LoadFile(ctx, fixture(t, "good_a")); err != nil {
			t.Fatal(err)
		}
		decideOK(t, r)
		r.Close(ctx)
	}
	n := 0
	filepathWalk(t, dir, func() { n++ })
	if n == 0 {
		t.Fatalf("compilation cache %s is empty", dir)
	}
}

func TestDecideAllocs(t *testing.T) {
	ctx := context.Background()
	// Without a deadline the whole success path allocates nothing.
	r := newRuntime(t, testConfig().WithDeadline(0))
	if err := r.LoadFile(ctx, fixture(t, "sensor")); err != nil {
		t.Fatal(err)
	}
	s, d := testSensors(), current()
	if n := testing.AllocsPerRun(2000, func() { r.Decide(ctx, &s, &d) }); n != 0 {
		t.Errorf("Decide without deadline: %v allocs per call, want 0", n)
	}

	// With the deadline, an instrumented module allocates nothing either:
	// the timer is re-armed, the stop flag set only on overrun.
	r2 := newRuntime(t, testConfig().WithDeadline(50*time.Millisecond))
	if err := r2.LoadFile(ctx, fixture(t, "sensor")); err != nil {
		t.Fatal(err)
	}
	if !r2.active.Load().mod.instrumented {
		t.Fatal("sensor.wasm not instrumented")
	}
	if n := testing.AllocsPerRun(2000, func() { r2.Decide(ctx, &s, &d) }); n != 0 {
		t.Errorf("Decide with deadline (instrumented): %v allocs per call, want 0", n)
	}

	// On the fallback runtime, wazero's WithCloseOnContextDone allocates
	// inside every call (a channel, a goroutine, a closure); Decide adds
	// nothing: compare against a bare CallWithStack on the same instance.
	cfg := testConfig().WithDeadline(50 * time.Millisecond)
	cfg.noInstrument = true
	r3 := newRuntime(t, cfg)
	if err := r3.LoadFile(ctx, fixture(t, "sensor")); err != nil {
		t.Fatal(err)
	}
	inst := r3.active.Load()
	dctx := &r3.hot.dctx
	// The goroutine wazero starts per call sometimes needs a fresh g (one
	// more malloc, counted process-wide): take the minimum of a few rounds.
	bare, full := 1e9, 1e9
	for range 5 {
		bare = min(bare, testing.AllocsPerRun(2000, func() {
			c := dctx.arm(startThreadClock())
			inst.decide.CallWithStack(c, inst.stack)
			dctx.disarm()
		}))
		full = min(full, testing.AllocsPerRun(2000, func() { r3.Decide(ctx, &s, &d) }))
	}
	t.Logf("allocs per call on the fallback runtime: bare wazero call %v, Decide %v", bare, full)
	if full > bare {
		t.Errorf("Decide allocates %v per call, the wazero call alone %v: Decide adds %v", full, bare, full-bare)
	}
	for _, r := range []*Runtime{r2, r3} {
		if st := r.Stats(); st.Failures != 0 {
			t.Fatalf("failures during alloc test: %+v", st)
		}
	}
}

func TestConcurrentDecideRefused(t *testing.T) {
	r := newRuntime(t, testConfig())
	r.calling.Store(true) // as if another goroutine were inside Decide
	s, d := testSensors(), current()
	if _, err := r.Decide(context.Background(), &s, &d); !errors.Is(err, ErrConcurrentDecide) {
		t.Fatalf("err = %v, want ErrConcurrentDecide", err)
	}
	r.calling.Store(false)
	r.Close(context.Background())
	if _, err := r.Decide(context.Background(), &s, &d); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: err = %v, want ErrClosed", err)
	}
}

func TestDecideCanceledContext(t *testing.T) {
	r := newRuntime(t, testConfig())
	if err := r.LoadFile(context.Background(), fixture(t, "good_a")); err != nil {
		t.Fatal(err)
	}
	decideOK(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, d := testSensors(), current()
	res, _ := r.Decide(ctx, &s, &d)
	if res.Outcome != OutcomeCanceled || res.Fallback != FallbackLastGood || d.Tier != 1 {
		t.Fatalf("res %+v tier %d; want canceled with last good (tier 1)", res, d.Tier)
	}
	if r.Stats().Failures != 0 {
		t.Fatal("a canceled caller context must not count as a module failure")
	}
}
