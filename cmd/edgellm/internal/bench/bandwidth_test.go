package bench

import (
	"fmt"
	"testing"
)

func TestReadBandwidth(t *testing.T) {
	bw := ReadBandwidth(64<<20, 1, 2)
	// Any machine this runs on streams well over 100 MB/s and under 10 TB/s.
	if bw < 1e8 || bw > 1e13 {
		t.Fatalf("read bandwidth %.3g B/s is implausible", bw)
	}
}

// BenchmarkReadBandwidth reports GB/s for 1 and 2 threads over 1 GiB (well
// past every cache level): the roofline in docs/BENCHMARKS.md.
func BenchmarkReadBandwidth(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.ReportMetric(ReadBandwidth(1<<30, threads, 5)/1e9, "GB/s")
			}
		})
	}
}
