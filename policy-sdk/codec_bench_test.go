//go:build !wasip1

package sdk_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/wasmbuild"
)

// BenchmarkGuestCodec compares, in one run, a guest built with the wire
// codec (the default) and the same guest built with the abi codec (-tags
// edgellm_abicodec: the SDK before the wire codec), both in the real host
// runtime with a per-call deadline (wazero's termination checks on),
// calls interleaved so both see the same machine noise. Guests: the SDK's
// probe (which itself loops over all 128 layers) and policies/default.
// Reported per codec: p50/p99/p99.9 of Result.Latency, and the ratio of the
// p50s abi/wire.
func BenchmarkGuestCodec(b *testing.B) {
	for _, g := range []struct{ name, dir string }{
		{"probe", "testdata/probe"},
		{"default", "../policies/default"},
	} {
		b.Run(g.name, func(b *testing.B) {
			wire := loadGuest(b, g.dir)
			old := loadGuest(b, g.dir, "-tags=edgellm_abicodec")
			ctx := context.Background()
			s := abi.Sensors{Present: abi.PresentMemAvailable, MemAvailableMB: 4000, CtxLen: 10, TiersAvailable: 4, LayerCount: 8}
			lw, lo := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			call := func(r *policy.Runtime, lat []time.Duration) []time.Duration {
				d := abi.Decision{KVType: abi.KVF16}
				res, err := r.Decide(ctx, &s, &d)
				if err != nil || res.Outcome != policy.OutcomeOK {
					b.Fatalf("Decide: %+v %v", res, err)
				}
				return append(lat, res.Latency)
			}
			for range 1000 { // warm up
				call(wire, nil)
				call(old, nil)
			}
			b.ResetTimer()
			for range b.N {
				lw = call(wire, lw)
				lo = call(old, lo)
			}
			b.StopTimer()
			slices.Sort(lw)
			slices.Sort(lo)
			p := func(l []time.Duration, q float64) float64 {
				return float64(l[min(len(l)-1, int(q*float64(len(l))))].Nanoseconds())
			}
			b.ReportMetric(p(lw, 0.5), "wire-p50-ns")
			b.ReportMetric(p(lw, 0.99), "wire-p99-ns")
			b.ReportMetric(p(lw, 0.999), "wire-p99.9-ns")
			b.ReportMetric(p(lo, 0.5), "abi-p50-ns")
			b.ReportMetric(p(lo, 0.99), "abi-p99-ns")
			b.ReportMetric(p(lo, 0.999), "abi-p99.9-ns")
			b.ReportMetric(p(lo, 0.5)/p(lw, 0.5), "abi/wire-p50")
		})
	}
}

// loadGuest builds the policy in dir with the extra go build args and loads
// it into a host runtime with a deadline (1 s: its value does not change
// the cost, only that one is set; a long one keeps scheduler stalls on a
// loaded machine from failing the run).
func loadGuest(b *testing.B, dir string, args ...string) *policy.Runtime {
	b.Helper()
	path, err := wasmbuild.Build(dir, b.TempDir(), args...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	r, err := policy.NewRuntime(ctx, policy.NewConfig().WithInsecure(true).WithDeadline(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(ctx) })
	if err := r.LoadFile(ctx, path); err != nil {
		b.Fatal(err)
	}
	return r
}
