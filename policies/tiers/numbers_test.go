package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/policy-sdk/policytest"
)

// TestGuestNumbers measures, in one process and interleaved, the
// AssemblyScript tiers module against the same logic in Go and against the
// Go default policy: module size raw and gzip, compile+instantiate time
// (in-memory compilation cache, so every load compiles), the first Decide
// after instantiation, and Decide p50/p99 with the default 5 ms deadline
// on. Run with EDGELLM_AS_NUMBERS=1 (make bench); docs/BENCHMARKS.md.
func TestGuestNumbers(t *testing.T) {
	if os.Getenv("EDGELLM_AS_NUMBERS") == "" {
		t.Skip("set EDGELLM_AS_NUMBERS=1 (make bench)")
	}
	if _, err := os.Stat(asWasm); err != nil {
		t.Fatalf("%s: %v (make policies)", asWasm, err)
	}
	mods := []struct{ name, path string }{
		{"AssemblyScript tiers", asWasm},
		{"Go tiers", policytest.Build(t, ".")},
		{"Go default policy", policytest.Build(t, "../default")},
	}
	const rounds, calls = 7, 20000
	type acc struct {
		load, first []time.Duration
		lat         []time.Duration
		overruns    int
	}
	res := make([]acc, len(mods))
	ctx := context.Background()
	for round := 0; round < rounds; round++ {
		for i, m := range mods {
			r, err := policy.NewRuntime(ctx, policy.NewConfig().WithInsecure(true).WithCacheDir("-").
				WithLogger(slog.New(slog.DiscardHandler)).WithLimits(policy.Limits{NTiers: 4, NLayers: 6, MaxK: 8, MaxWindow: 4096,
				KVTypes: []abi.KVType{abi.KVF16}, MaxThreads: 4, MaxCadence: 64}))
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			if err := r.LoadFile(ctx, m.path); err != nil {
				t.Fatal(err)
			}
			res[i].load = append(res[i].load, time.Since(t0))
			s := engine()
			s.Present |= abi.PresentThermalStatus | abi.PresentMemAvailable | abi.PresentMemThreshold | abi.PresentCurrent
			s.MemAvailableMB, s.MemThresholdMB = 3000, 512
			for k := 0; k < calls; k++ {
				s.ThermalStatus = abi.ThermalStatus(k / 100 % 3) // none, light, moderate
				d := start()
				d.Tier = int32(k % 4)
				out, err := r.Decide(ctx, &s, &d)
				// A call descheduled past the deadline on a loaded machine
				// counts with its latency: a slow call, not a broken one.
				// The calls answered while the instance is rebuilt after it
				// (recovering) did not run the guest and are left out.
				if err != nil {
					t.Fatalf("%s call %d: %v", m.name, k, err)
				}
				if out.Outcome != policy.OutcomeOK {
					res[i].overruns++
					if out.Outcome != policy.OutcomeDeadline {
						continue
					}
				}
				if k == 0 {
					res[i].first = append(res[i].first, out.Latency)
				} else {
					res[i].lat = append(res[i].lat, out.Latency)
				}
			}
			r.Close(ctx)
		}
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	pct := func(d []time.Duration, p float64) time.Duration { slices.Sort(d); return d[int(p*float64(len(d)-1))] }
	t.Logf("| module | raw bytes | gzip bytes | compile+instantiate (median of %d) | first call (median) | decide p50 | decide p99 | calls not OK (overruns, recovering) |", rounds)
	t.Logf("|---|---:|---:|---:|---:|---:|---:|---:|")
	for i, m := range mods {
		raw, _ := os.ReadFile(m.path)
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(raw)
		zw.Close()
		t.Logf("| %s | %d | %d | %s | %s | %s | %s | %d of %d |", m.name, len(raw), gz.Len(), fmtDur(med(res[i].load)), fmtDur(med(res[i].first)),
			fmtDur(pct(res[i].lat, 0.50)), fmtDur(pct(res[i].lat, 0.99)), res[i].overruns, rounds*calls)
	}
}

func fmtDur(d time.Duration) string {
	if d >= time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f µs", float64(d)/1e3)
}
