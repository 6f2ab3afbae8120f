package policy

import (
	"context"
	"slices"
	"testing"
	"time"
)

// latencyTargetP99 is the goal for one Decide call with the deadline on
// (issue #4), asserted by TestDecideLatency in make test.
const latencyTargetP99 = 20 * time.Microsecond

// latencyGuardP50 is a regression guard on the median call (no goal is
// stated for it): measured 1.7-2.9 µs with instrumented modules.
const latencyGuardP50 = 10 * time.Microsecond

// latencyRounds is how many rounds of latencyCalls calls TestDecideLatency
// tries before it fails. A round passes when its own p50 and p99 both meet
// their bounds; on a loaded machine a round whose p99 caught the scheduler
// is retried rather than the bound loosened.
const (
	latencyRounds  = 10
	latencyCalls   = 5000
	latencySpoiled = 50
)

// guests are the modules measured: a WAT fixture, a minimal Go guest
// (testdata/goguest) and the reference Go policy (policies/default, else
// testdata/goguest again).
var guests = []struct {
	name string
	path func(testing.TB) string
}{
	{"WAT", func(t testing.TB) string { return fixture(t, "sensor") }},
	{"GoGuest", goGuest},
	{"GoDefault", defaultPolicy},
}

// loadedRuntime loads path with a 20 ms deadline, instrumented or (wazero)
// on the fallback runtime with wazero's termination checks.
func loadedRuntime(t testing.TB, path string, wazero bool) *Runtime {
	cfg := testConfig().WithDeadline(20 * time.Millisecond)
	cfg.noInstrument = wazero
	r := newRuntime(t, cfg)
	if err := r.LoadFile(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	if got := r.active.Load().mod.instrumented; got == wazero {
		t.Fatalf("instrumented = %v, want %v", got, !wazero)
	}
	return r
}

// latencies runs n Decide calls and returns their sorted durations. A call
// descheduled past its deadline on a loaded machine counts with its (long)
// latency: it is a slow call, not a broken one. The runtime then rebuilds
// the instance, and calls answer OutcomeRecovering meanwhile; those are not
// the module's latency, so latencies waits for the rebuild and reports the
// round as spoiled (ok false).
func latencies(t testing.TB, r *Runtime, n int) (sorted []time.Duration, ok bool) {
	ctx := context.Background()
	s, d := testSensors(), current()
	out := make([]time.Duration, n)
	for i := range out {
		s.MemAvailableMB = int32(500 + i%1000)
		d = current()
		res, err := r.Decide(ctx, &s, &d)
		if err == nil && res.Outcome == OutcomeRecovering {
			waitRecovered(t, r)
			return nil, false
		}
		if err != nil || (res.Outcome != OutcomeOK && res.Outcome != OutcomeDeadline) {
			t.Fatalf("step %d: %+v %v", i, res, err)
		}
		out[i] = res.Latency
	}
	slices.Sort(out)
	return out, true
}

// waitRecovered calls Decide until the runtime has rebuilt its instance
// (at most 30 s: the rebuild runs off the hot path on a loaded machine).
func waitRecovered(t testing.TB, r *Runtime) {
	s, d := testSensors(), current()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		d = current()
		if res, err := r.Decide(context.Background(), &s, &d); err == nil && res.Outcome == OutcomeOK {
			return
		}
	}
	t.Fatal("the runtime did not recover from a deadline overrun within 30 s")
}

func pct(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// TestDecideLatency asserts the goal of p99 ≤ 20 µs per Decide call with
// the deadline on (instrumented modules), and the p50 guard, both read from
// the same round of latencyCalls calls: the test passes at the first round
// that meets both and fails after latencyRounds rounds that do not. A round
// in which a call was descheduled past the deadline is spoiled and retried
// without counting (see latencies), at most latencySpoiled times.
func TestDecideLatency(t *testing.T) {
	for _, g := range guests {
		t.Run(g.name, func(t *testing.T) {
			r := loadedRuntime(t, g.path(t), false)
			latencies(t, r, 2000) // warm up
			for round, spoiled := 0, 0; ; {
				l, ok := latencies(t, r, latencyCalls)
				if !ok {
					// Not a latency measurement: the scheduler held the
					// thread past the 20 ms deadline. Retried without
					// counting, up to latencySpoiled times.
					spoiled++
					t.Logf("%s: a call overran the deadline (descheduled); round spoiled (%d)", g.name, spoiled)
					if spoiled == latencySpoiled {
						t.Fatalf("%d rounds spoiled by calls descheduled past the deadline: the machine is too loaded to measure", spoiled)
					}
					continue
				}
				p50, p99 := pct(l, 0.5), pct(l, 0.99)
				t.Logf("%s round %d: p50 %v p99 %v p99.9 %v max %v", g.name, round, p50, p99, pct(l, 0.999), l[len(l)-1])
				if p50 <= latencyGuardP50 && p99 <= latencyTargetP99 {
					return
				}
				if round++; round == latencyRounds {
					t.Fatalf("no round of %d calls in %d met p50 ≤ %v and p99 ≤ %v together",
						latencyCalls, latencyRounds, latencyGuardP50, latencyTargetP99)
				}
			}
		})
	}
}

// BenchmarkDecide reports ns/op and the p50/p99/p99.9 of single calls, with
// the deadline on (instrumented modules, and "-wazero": the same modules on
// the fallback runtime with wazero's termination checks, the mechanism used
// before instrumentation) and off (WAT, GoDefault: what the checks cost), all
// in one process.
func BenchmarkDecide(b *testing.B) {
	for _, g := range guests {
		b.Run(g.name, func(b *testing.B) { benchDecide(b, loadedRuntime(b, g.path(b), false)) })
	}
	for _, g := range guests {
		if g.name == "GoGuest" {
			continue
		}
		b.Run(g.name+"-no-deadline", func(b *testing.B) {
			r := newRuntime(b, testConfig().WithDeadline(0))
			if err := r.LoadFile(context.Background(), g.path(b)); err != nil {
				b.Fatal(err)
			}
			benchDecide(b, r)
		})
	}
	for _, g := range guests {
		b.Run(g.name+"-wazero", func(b *testing.B) { benchDecide(b, loadedRuntime(b, g.path(b), true)) })
	}
}

func benchDecide(b *testing.B, r *Runtime) {
	ctx := context.Background()
	s, d := testSensors(), current()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d = current()
		res, err := r.Decide(ctx, &s, &d)
		if err != nil || (res.Outcome != OutcomeOK && res.Outcome != OutcomeDeadline) {
			b.Fatalf("step %d: %+v %v", i, res, err)
		}
		lat = append(lat, res.Latency) // a deadline overrun counts with its latency
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(pct(lat, 0.5).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(pct(lat, 0.99).Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(pct(lat, 0.999).Nanoseconds()), "p99.9-ns")
}
