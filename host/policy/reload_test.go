package policy

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// 1 000 hot reloads (two modules alternating, written to the watched file)
// while a loop calls Decide continuously: no failure, no Decide slower than
// the deadline, and every reload observed by the loop.
func TestHotReload1000(t *testing.T) {
	reloads := 1000
	if testing.Short() {
		reloads = 100
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The deadline is generous: this test is about reloads, and on a loaded
	// 2-core CI machine a call can be descheduled for hundreds of ms, which
	// would be a (correctly handled) deadline failure, not a reload wait.
	deadline := 2 * time.Second
	const slow = 100 * time.Millisecond
	r := newRuntime(t, testConfig().WithDeadline(deadline).WithReloadDebounce(time.Millisecond))
	dir := t.TempDir()
	watched := filepath.Join(dir, "policy.wasm")
	wasm := [2][]byte{}
	for i, name := range []string{"good_a", "good_b"} {
		var err error
		if wasm[i], err = os.ReadFile(fixture(t, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeFileAtomic(watched, wasm[0], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Watch(ctx, watched); err != nil {
		t.Fatal(err)
	}

	// The decision loop: one "generation" of decisions per module.
	var (
		stop      atomic.Bool
		steps     atomic.Int64
		lastTier  atomic.Int32
		lastGen   atomic.Uint64
		bad       atomic.Int64
		slowest   atomic.Int64
		slowCalls atomic.Int64
		wg        sync.WaitGroup
		firstFail string
		failOnce  sync.Once
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			s, d := testSensors(), current()
			res, err := r.Decide(ctx, &s, &d)
			if err != nil || res.Outcome != OutcomeOK {
				bad.Add(1)
				failOnce.Do(func() { firstFail = res.Outcome.String() })
			}
			if res.Latency >= slow {
				slowCalls.Add(1)
			}
			if int64(res.Latency) > slowest.Load() {
				slowest.Store(int64(res.Latency))
			}
			lastTier.Store(d.Tier)
			lastGen.Store(res.Generation)
			steps.Add(1)
		}
	}()

	start := time.Now()
	for i := 1; i <= reloads; i++ {
		want := uint64(i + 1)
		if err := writeFileAtomic(watched, wasm[i%2], 0o644); err != nil {
			t.Fatal(err)
		}
		// good_a decides tier 1, good_b tier 2.
		waitFor(t, 10*time.Second, "reload to be observed by Decide", func() bool {
			return lastGen.Load() >= want && lastTier.Load() == int32(1+i%2)
		})
	}
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	st := r.Stats()
	t.Logf("%d reloads in %v (%v each), %d decisions, slowest Decide %v, stats %+v",
		reloads, elapsed, elapsed/time.Duration(reloads), steps.Load(), time.Duration(slowest.Load()), st)
	if bad.Load() != 0 {
		t.Errorf("%d Decide calls did not succeed (first: %s)", bad.Load(), firstFail)
	}
	// A Decide that waited on a reload would be slow once per reload. On this
	// shared 2-core machine the scheduler alone can stall a call now and then,
	// so a handful of slow calls is noise; one per reload is a wait.
	if n := slowCalls.Load(); n > int64(reloads/10) {
		t.Errorf("%d Decide calls took ≥ %v (slowest %v): Decide waits on reloads", n, slow, time.Duration(slowest.Load()))
	}
	if st.Loads < uint64(reloads+1) || st.Failures != 0 {
		t.Errorf("loads %d (want ≥ %d), failures %d", st.Loads, reloads+1, st.Failures)
	}
}

// Signed bundles over the air: a watched .tar.gz replaced by newer
// revisions is picked up; an older one is refused and the current stays.
func TestWatchSignedBundle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newSigner(t)
	r := newRuntime(t, testConfig().WithInsecure(false).WithTrustedKey(s.pub).WithReloadDebounce(5*time.Millisecond))
	p := filepath.Join(t.TempDir(), "policy.tar.gz")
	s.bundle(t, "good_a", 1, p)
	if err := r.Watch(ctx, p); err != nil {
		t.Fatal(err)
	}
	for rev := int64(2); rev <= 10; rev++ {
		fix := []string{"good_a", "good_b"}[rev%2]
		s.bundle(t, fix, rev, p)
		waitFor(t, 10*time.Second, "revision", func() bool { return r.Revision() == rev })
		if d := decideOK(t, r); d.Tier != int32(1+rev%2) {
			t.Fatalf("revision %d: tier %d", rev, d.Tier)
		}
	}
	errs := r.Stats().LoadErrors
	s.bundle(t, "good_b", 3, p) // a rollback attempt
	waitFor(t, 10*time.Second, "the refusal", func() bool { return r.Stats().LoadErrors > errs })
	if r.Revision() != 10 || decideOK(t, r).Tier != 1 {
		t.Fatalf("after rollback attempt: revision %d", r.Revision())
	}
}
