package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// TestProbeReadsEveryWord: every reader implementation this CPU runs, at 1
// to 4 threads, returns the wrapping sum of every word of buffers of awkward
// lengths and offsets (not multiples of a line or of the vector step, not
// 64-byte aligned), so no chunk, tail or thread's slice is skipped or read
// twice.
func TestProbeReadsEveryWord(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 3))
	backing := make([]uint64, 1<<17+64)
	for i := range backing {
		backing[i] = rng.Uint64()
	}
	impls := probeImpls()
	t.Logf("probe implementations %v, best %s", impls, BandwidthPath())
	for _, impl := range impls {
		for _, words := range []int{1, 7, 8, 9, 63, 64, 65, 200, 511, 512, 513, 4099, 1 << 17} {
			for _, off := range []int{0, 1, 5} {
				buf := backing[off : off+words]
				var want uint64
				for _, w := range buf {
					want += w
				}
				for threads := 1; threads <= 4; threads++ {
					_, got, err := probeRead(impl, unsafe.Pointer(&buf[0]), words, threads)
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Fatalf("%v, %d words at offset %d, %d threads: sum %#x, want %#x", impl, words, off, threads, got, want)
					}
				}
			}
		}
	}
}

// TestProbeBufferSum: the probe's own buffer holds words[i] = i, so its sum
// is n(n-1)/2 (mod 2^64) when the whole of it is read by the best reader.
func TestProbeBufferSum(t *testing.T) {
	p, err := NewBandwidthProbe(5<<20 + 123)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Bytes() != 6<<20 {
		t.Fatalf("Bytes() = %d, want %d (rounded up to 2 MiB)", p.Bytes(), 6<<20)
	}
	n := uint64(p.Bytes() / 8)
	for threads := 1; threads <= 3; threads++ {
		_, got, err := probeRead(bestProbeImpl(), p.buf, int(n), threads)
		if err != nil {
			t.Fatal(err)
		}
		if want := n * (n - 1) / 2; got != want {
			t.Fatalf("%d threads: sum %d, want %d", threads, got, want)
		}
	}
	if bw, err := p.Read(2, 2); err != nil || bw <= 0 || math.IsInf(bw, 0) {
		t.Fatalf("Read = %g, %v", bw, err)
	}
}

// TestProbeSplit: the readers' slices cover the buffer exactly, in order,
// each boundary but the end on a 64-byte line, no slice more than one line
// (plus the final partial line) longer than another.
func TestProbeSplit(t *testing.T) {
	for _, words := range []int{0, 1, 7, 8, 9, 17, 64, 100, 1000, 1 << 20, 1<<20 + 3} {
		for threads := 1; threads <= 9; threads++ {
			next, minLen, maxLen := 0, math.MaxInt, 0
			for i := 0; i < threads; i++ {
				lo, hi := probeSplit(words, threads, i)
				if lo != next || hi < lo {
					t.Fatalf("%d words, %d threads: reader %d has [%d, %d), want it to start at %d", words, threads, i, lo, hi, next)
				}
				if lo%8 != 0 || (i < threads-1 && hi%8 != 0) {
					t.Fatalf("%d words, %d threads: reader %d [%d, %d) is off the line grid", words, threads, i, lo, hi)
				}
				minLen, maxLen, next = min(minLen, hi/8-lo/8), max(maxLen, hi/8-lo/8), hi
			}
			if next != words {
				t.Fatalf("%d words, %d threads: slices end at %d", words, threads, next)
			}
			if maxLen-minLen > 1 {
				t.Fatalf("%d words, %d threads: slices of %d to %d lines", words, threads, minLen, maxLen)
			}
		}
	}
}

func TestParseCacheSize(t *testing.T) {
	for in, want := range map[string]int{"48K": 48 << 10, "307200K": 300 << 20, "32M": 32 << 20, "1G": 1 << 30, "512": 512, "x": 0, "": 0} {
		if got := parseCacheSize(in); got != want {
			t.Errorf("parseCacheSize(%q) = %d, want %d", in, got, want)
		}
	}
	if ProbeBytes() < 1<<30 || ProbeBytes() < 4*lastLevelCache() {
		t.Fatalf("ProbeBytes() = %d with a last-level cache of %d", ProbeBytes(), lastLevelCache())
	}
}

// BenchmarkReadBandwidth reports GB/s for 1 and 2 threads over ProbeBytes
// (at least 1 GiB, 4× the last-level cache), best of 5 passes: the roofline
// in docs/BENCHMARKS.md.
func BenchmarkReadBandwidth(b *testing.B) {
	p, err := NewBandwidthProbe(ProbeBytes())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	b.Logf("reader %s, %d MiB", BandwidthPath(), p.Bytes()>>20)
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				bw, err := p.Read(threads, 5)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(bw/1e9, "GB/s")
			}
		})
	}
}

// BenchmarkReadBandwidthVsGoLoop measures the probe and the Go loop it
// replaced (goLoopBandwidth: goroutines summing 8-byte words) in one
// process, alternating, over the same size: the probe ÷ the old loop.
func BenchmarkReadBandwidthVsGoLoop(b *testing.B) {
	p, err := NewBandwidthProbe(ProbeBytes())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	words := make([]uint64, p.Bytes()/8)
	for i := range words {
		words[i] = uint64(i)
	}
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var probe, loop float64
				for r := 0; r < 3; r++ {
					bw, err := p.Read(threads, 1)
					if err != nil {
						b.Fatal(err)
					}
					probe = max(probe, bw)
					loop = max(loop, goLoopBandwidth(words, threads))
				}
				b.ReportMetric(probe/1e9, "probe-GB/s")
				b.ReportMetric(loop/1e9, "goloop-GB/s")
				b.ReportMetric(probe/loop, "probe/goloop")
			}
		})
	}
}

// goLoopBandwidth is the probe this package had before bwprobe.c: one pass
// of `threads` goroutines summing 8-byte words, in bytes per second.
func goLoopBandwidth(words []uint64, threads int) float64 {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sink uint64
	chunk := len(words) / threads
	start := time.Now()
	for t := 0; t < threads; t++ {
		part := words[t*chunk : (t+1)*chunk]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s0, s1, s2, s3 uint64
			for i := 0; i+3 < len(part); i += 4 {
				s0 += part[i]
				s1 += part[i+1]
				s2 += part[i+2]
				s3 += part[i+3]
			}
			mu.Lock()
			sink += s0 + s1 + s2 + s3
			mu.Unlock()
		}()
	}
	wg.Wait()
	bw := float64(chunk*threads*8) / time.Since(start).Seconds()
	if sink == 42 { // keep the sums alive
		println()
	}
	return bw
}

// BenchmarkProbeImpls streams the probe's buffer with every reader this CPU
// runs, alternating them pass by pass (so machine noise falls on all), and
// reports each one's best GB/s at 1 thread.
func BenchmarkProbeImpls(b *testing.B) {
	p, err := NewBandwidthProbe(ProbeBytes())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	impls := probeImpls()
	for i := 0; i < b.N; i++ {
		best := make([]float64, len(impls))
		for r := 0; r < 3; r++ {
			for k, impl := range impls {
				sec, _, err := probeRead(impl, p.buf, p.Bytes()/8, 1)
				if err != nil {
					b.Fatal(err)
				}
				best[k] = max(best[k], float64(p.Bytes())/sec)
			}
		}
		for k, impl := range impls {
			b.ReportMetric(best[k]/1e9, impl.String()+"-GB/s")
		}
	}
}
