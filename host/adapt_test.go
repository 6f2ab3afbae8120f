package host

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/cputime"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/wasmbuild"
)

func buildPolicyWasm(tb testing.TB, name string) string {
	tb.Helper()
	out, err := wasmbuild.Build("../policies/"+name, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// overheadSample is one generation's CPU accounting (all in CPU time, not
// wall time, so that a loaded machine's preemptions count nowhere).
type overheadSample struct {
	decode time.Duration   // the decode thread's CPU time in decode steps (Stats.DecodeCPU)
	calls  time.Duration   // the decode thread's CPU time inside BeforeStep (the whole per-step policy path), clock reads subtracted
	other  time.Duration   // the rest of the process over the decode span: sampling, Go runtime, background goroutines
	n      int             // BeforeStep calls
	each   []time.Duration // per call, as calls
	fails  int             // policy failures
}

// overheadRun generates n greedy tokens, with the default policy at the
// default cadence when rt is not nil, on one compute thread.
func overheadRun(tb testing.TB, eng Engine, rt *policy.Runtime, live *liveSensors, n int) overheadSample {
	tb.Helper()
	sess, err := eng.NewSession(SessionConfig{NCtx: n + 8, Threads: 1})
	if err != nil {
		tb.Fatal(err)
	}
	defer sess.Close()
	// MeasureCPU keeps Generate on one OS thread, so the thread clock read
	// around BeforeStep is the decode thread's.
	opts := GenerateOptions{NPredict: n, Sampling: SamplingParams{TopP: 1, RepeatPenalty: 1}, MeasureCPU: true}
	o := overheadSample{each: make([]time.Duration, 0, n)}
	var a *Adapter
	if rt != nil {
		a = newAdapter(rt, live, eng, sess, SessionConfig{NCtx: n + 8, Threads: 1, KVType: KVF16}, testWriter{tb})
		// The clock is a system call (~0.6 µs of CPU on the VM here, more
		// under load): the cost of one reading, measured by an empty pair
		// just before each call, in the same conditions, is subtracted.
		opts.BeforeStep = func(step int) error {
			c0 := cputime.Thread()
			c1 := cputime.Thread()
			err := a.BeforeStep(step)
			if step >= 2 { // the decode span starts at step 2 (Stats.DecodeCPU)
				c := cputime.Thread() - c1 - (c1 - c0)
				o.calls += c
				o.each = append(o.each, c)
				o.n++
			}
			return err
		}
	}
	opts.Prompt = []int32{eng.Vocab().BOS()}
	st, err := Generate(context.Background(), sess, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if st.DecodeCPU <= 0 || st.DecodeProcCPU <= 0 {
		tb.Skip("no CPU clocks on this platform")
	}
	o.decode = st.DecodeCPU
	o.other = st.DecodeProcCPU - st.DecodeCPU - o.calls
	if a != nil {
		st := a.Stats()
		if st.Calls == 0 {
			tb.Fatal("the policy was never called")
		}
		o.fails = st.Failures
	}
	return o
}

// overheadResult summarises interleaved runs with and without the policy.
type overheadResult struct {
	// share is the median over runs of the decode thread's CPU time inside
	// the per-step policy path over its CPU time in decode steps.
	share, minShare float64
	// extra is the median over pairs of the rest of the process's CPU time
	// with the policy minus without (background goroutines the policy
	// wakes, timers), over decode CPU time; it may be negative (noise).
	extra float64
	// whole is the median over pairs of the process CPU time over the decode
	// span with the policy over without (every thread, all effects,
	// including the noise of two separate runs).
	whole float64
	// perCall is the median per-step CPU time inside BeforeStep, and
	// perStep the median decode CPU time per step without the policy.
	perCall, perStep time.Duration
	// medCall is the median over runs of the median call's CPU time over
	// the decode CPU time per step without the policy.
	medCall float64
	// minCall is the least over runs of the same ratio: other processes
	// only add to a call's CPU time (they evict its code and data from
	// the shared caches), so the least-disturbed run is the estimate of
	// its cost that a loaded machine does not inflate.
	minCall  float64
	failures int
}

// measureOverhead interleaves runs with and without the policy (A,B,A,B…)
// in one process and reports the CPU-time shares of overheadResult.
func measureOverhead(tb testing.TB, model string, n, reps int) overheadResult {
	eng, err := Load(model, LoadOptions{Engine: "llamacpp"})
	if err != nil {
		tb.Fatal(err)
	}
	defer eng.Close()
	// One runtime and one sensor sampler for all runs, as in one long
	// generation: their start-up (compilation, the first smaps_rollup read)
	// is not per-token overhead.
	// The decisions are held to the one thread the runs decode with: what
	// is measured is the cost of asking the policy every step, not what its
	// thread rule does to this tiny model (two threads only slow it down;
	// policies/default TestThreadsRaiseBackoff), whose pool rebuilds would
	// otherwise land inside the measured path.
	limits := policyLimits(eng, n+8)
	limits.MaxThreads = 1
	rt, err := policy.NewRuntime(context.Background(), policy.NewConfig().WithInsecure(true).WithLimits(limits))
	if err != nil {
		tb.Fatal(err)
	}
	defer rt.Close(context.Background())
	if err := rt.LoadFile(context.Background(), buildPolicyWasm(tb, "default")); err != nil {
		tb.Fatal(err)
	}
	live, err := newLiveSensors(DefaultSensorInterval, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer live.Close()
	overheadRun(tb, eng, rt, live, n) // warm-up
	var r overheadResult
	shares, extras, wholes := make([]float64, reps), make([]float64, reps), make([]float64, reps)
	perCall, perStep, medCall := make([]float64, reps), make([]float64, reps), make([]float64, reps)
	for i := 0; i < reps; i++ {
		w := overheadRun(tb, eng, rt, live, n)
		wo := overheadRun(tb, eng, nil, nil, n)
		shares[i] = float64(w.calls) / float64(w.decode)
		extras[i] = float64(w.other-wo.other) / float64(w.decode)
		wholes[i] = float64(w.decode+w.calls+w.other) / float64(wo.decode+wo.calls+wo.other)
		perCall[i] = float64(w.calls) / float64(max(w.n, 1))
		each := make([]float64, len(w.each))
		for j, c := range w.each {
			each[j] = float64(c)
		}
		medCall[i] = median(each) / (float64(wo.decode) / float64(n-1))
		perStep[i] = float64(wo.decode) / float64(n-1)
		r.failures += w.fails
	}
	r.share, r.minShare, r.extra, r.whole = median(shares), slices.Min(shares), median(extras), median(wholes)
	r.perCall, r.perStep = time.Duration(median(perCall)), time.Duration(median(perStep))
	r.medCall, r.minCall = median(medCall), slices.Min(medCall)
	return r
}
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// TestPolicyOverheadStories260K: the default policy at the default cadence
// (every step) costs at most 5% of decode time (median call ≤ 3% of a
// step), with no policy failure. The goal is 1%; it is NOT met on this tiny
// model, whose step is the cheapest there is: quiet, with the decisions held
// to one thread, the path took 6-9 µs of a 550 µs step (share 1.1-1.6%,
// median call 0.90-1.07%; 2-core AMD EPYC VM) and 23-33 µs of a 1.1-1.2 ms
// step (share 2.0-2.8%, least disturbed 1.4-1.9%; median call 1.5-2.8%,
// least disturbed 0.96-1.72%; 2-core Sapphire Rapids VM, load ≤ 0.5, the
// same on a commit of 2026-11-25). perf put half of it in the guest's
// compiled code, which runs with cold caches between decode steps. On a
// llama3.2-1b-shaped model the same path is < 1% (docs/BENCHMARKS.md
// "Policy at every decode step").
//
// The shares are CPU time, not wall time: on a loaded machine a preemption
// that lands inside a call adds milliseconds of wall time to it, and
// whether it lands there is luck, not cost. The share is the decode
// thread's CPU time inside BeforeStep (the whole per-step path: device
// readings, the Wasm call with its deadline, applying the decision) over
// its CPU time in decode steps, per run, and the median call is the
// median single call over the decode CPU time of a step. Both are bounded
// in the least disturbed of seven interleaved runs and logged as medians
// over runs: other processes only add to them (they evict the path's code
// and data from the shared caches between two steps). Under load (2-core
// VM, load average 8-16) the median call was 0.86-2.10% and the share
// 1.0-3.94%. The ratio depends on the CPU's caches, so the bounds are set
// by what they must catch, not by one CPU: a path made 3% of a step slower
// (a 17 µs spin added to BeforeStep on a 550 µs step; a 40 µs spin on a
// 1.3 ms step of the loaded Sapphire Rapids VM, least disturbed call
// 4.38%) fails.
//
// The rest of the process (the deadline watchdog, the Go runtime's
// monitor thread) is compared with and without the policy, pair by pair,
// and logged with the whole-process CPU ratio: the monitor thread alone
// varied by ±10 ms per 300 ms run there, more than the 1% asserted.
func TestPolicyOverheadStories260K(t *testing.T) {
	r := measureOverhead(t, sharedtest.Stories260K(t), 512, 7)
	t.Logf("stories260K, 512 tokens, default policy every %d step(s): per step %v in the policy path, %v decoding (CPU); policy share of decode CPU median %.2f%% (min %.2f%%); median call %.2f%% of a step (least disturbed run %.2f%%); other threads %+.2f%%; whole process with/without %.4f; %d failures",
		DefaultCadence, r.perCall, r.perStep, 100*r.share, 100*r.minShare, 100*r.medCall, 100*r.minCall, 100*r.extra, r.whole, r.failures)
	if r.failures != 0 {
		t.Errorf("%d policy calls failed", r.failures)
	}
	const callBound, shareBound = 0.03, 0.05
	if r.minCall > callBound {
		t.Errorf("the median policy call takes %.2f%% of a decode step's CPU time in the least disturbed of the runs (median over runs %.2f%%), want ≤ %.1f%%", 100*r.minCall, 100*r.medCall, 100*callBound)
	}
	if r.minShare > shareBound {
		t.Errorf("the policy path takes %.2f%% of decode CPU time in the least disturbed of the runs (median over runs %.2f%%), want ≤ %.1f%%", 100*r.minShare, 100*r.share, 100*shareBound)
	}
}

// BenchmarkPolicyOverhead: EDGELLM_BENCH_MODEL selects another model (e.g. a
// synthetic llama3.2-1b made with edgellm synth), EDGELLM_BENCH_TOKENS the
// tokens per run (default 128).
func BenchmarkPolicyOverhead(b *testing.B) {
	model := os.Getenv("EDGELLM_BENCH_MODEL")
	if model == "" {
		model = sharedtest.Stories260K(b)
	}
	n := 128
	if v, err := strconv.Atoi(os.Getenv("EDGELLM_BENCH_TOKENS")); err == nil && v > 2 {
		n = v
	}
	for i := 0; i < b.N; i++ {
		r := measureOverhead(b, model, n, 3)
		b.ReportMetric(100*r.share, "policy-%")
		b.ReportMetric(100*r.extra, "other-threads-%")
		b.ReportMetric(r.whole, "with/without")
		b.ReportMetric(float64(r.perCall.Nanoseconds()), "ns/call")
		b.ReportMetric(float64(r.perStep.Nanoseconds()), "ns/step")
		b.ReportMetric(float64(r.failures), "failures")
	}
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.tb.Log(string(p)); return len(p), nil }
