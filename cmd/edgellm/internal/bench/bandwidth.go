package bench

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lpthread
#include "bwprobe.h"
*/
import "C"

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"
)

// The memory read-bandwidth probe (bwprobe.c) is the denominator of the
// decode roofline: a memory-bound decode step reads every weight once, so
// tok/s ≤ bandwidth / bytes read per token. It measures the machine, not the
// loop: the readers are C with the widest loads the CPU has (AVX-512, AVX2,
// NEON, or portable scalar, chosen at run time) into eight independent
// accumulators, one contiguous slice per thread, the threads started before
// the clock and released together, over a buffer several times the
// last-level cache, best of several passes.

// probeImpl names one reader implementation (C's BWP_*).
type probeImpl int

var probeNames = [...]string{C.BWP_SCALAR: "scalar", C.BWP_AVX2: "avx2", C.BWP_AVX512: "avx512", C.BWP_NEON: "neon"}

func (i probeImpl) String() string { return probeNames[i] }

// probeImpls lists the reader implementations this CPU runs, slowest first.
func probeImpls() []probeImpl {
	var out []probeImpl
	for i := probeImpl(0); i < C.BWP_NIMPL; i++ {
		if C.bwp_impl_available(C.int(i)) != 0 {
			out = append(out, i)
		}
	}
	return out
}

// BandwidthPath names the reader the probe runs on this CPU ("avx512",
// "avx2", "neon" or "scalar").
func BandwidthPath() string { return bestProbeImpl().String() }

// bestProbeImpl is the widest reader this CPU runs.
func bestProbeImpl() probeImpl { return probeImpl(C.bwp_best_impl()) }

// probeRead reads every word of buf with `threads` readers using impl and
// returns the seconds from their release to the last one's end and the
// wrapping sum of the words.
func probeRead(impl probeImpl, buf unsafe.Pointer, words, threads int) (float64, uint64, error) {
	var sec C.double
	var sum C.uint64_t
	if C.bwp_read(C.int(impl), (*C.uint64_t)(buf), C.size_t(words), C.int(threads), &sec, &sum) != 0 {
		return 0, 0, errors.New("bench: bandwidth probe: implementation unavailable or thread start failed")
	}
	return float64(sec), uint64(sum), nil
}

// probeSplit is reader t's slice [lo, hi) of `words` words over `threads`.
func probeSplit(words, threads, t int) (lo, hi int) {
	var l, h C.size_t
	C.bwp_split(C.size_t(words), C.int(threads), C.int(t), &l, &h)
	return int(l), int(h)
}

// BandwidthProbe owns the buffer the probe streams (outside the Go heap,
// on transparent huge pages where the kernel allows).
type BandwidthProbe struct {
	buf   unsafe.Pointer
	bytes int
}

// NewBandwidthProbe allocates and fills a buffer of at least `bytes`
// (rounded up to 2 MiB).
func NewBandwidthProbe(bytes int) (*BandwidthProbe, error) {
	bytes = (bytes + 2<<20 - 1) &^ (2<<20 - 1)
	p := C.bwp_alloc(C.size_t(bytes))
	if p == nil {
		return nil, errors.New("bench: bandwidth probe: cannot allocate the buffer")
	}
	return &BandwidthProbe{buf: unsafe.Pointer(p), bytes: bytes}, nil
}

// Bytes is the buffer's size.
func (p *BandwidthProbe) Bytes() int { return p.bytes }

// Read streams the whole buffer with `threads` readers `reps` times and
// returns the best rate in bytes per second.
func (p *BandwidthProbe) Read(threads, reps int) (float64, error) {
	best := 0.0
	for r := 0; r < reps; r++ {
		sec, _, err := probeRead(bestProbeImpl(), p.buf, p.bytes/8, threads)
		if err != nil {
			return 0, err
		}
		if bw := float64(p.bytes) / sec; bw > best {
			best = bw
		}
	}
	return best, nil
}

// Close frees the buffer.
func (p *BandwidthProbe) Close() {
	if p.buf != nil {
		C.bwp_free((*C.uint64_t)(p.buf), C.size_t(p.bytes))
		p.buf = nil
	}
}

// ReadBandwidth measures how fast `threads` readers stream a buffer of
// `bytes`, returning bytes per second, best of `reps` (0 if the buffer
// cannot be had).
func ReadBandwidth(bytes, threads, reps int) float64 {
	p, err := NewBandwidthProbe(bytes)
	if err != nil {
		return 0
	}
	defer p.Close()
	bw, _ := p.Read(threads, reps)
	return bw
}

// ProbeBytes is the buffer size the roofline uses: four times the largest
// cache this Linux machine reports (sysfs), and at least 1 GiB.
func ProbeBytes() int {
	const floor = 1 << 30
	if n := 4 * lastLevelCache(); n > floor {
		return n
	}
	return floor
}

// lastLevelCache is the largest cache size cpu0 reports in sysfs, or 0.
func lastLevelCache() int {
	sizes, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*/size")
	largest := 0
	for _, f := range sizes {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n := parseCacheSize(strings.TrimSpace(string(b))); n > largest {
			largest = n
		}
	}
	return largest
}

// parseCacheSize reads sysfs's "48K", "2048K", "300M" (bytes if no suffix).
func parseCacheSize(s string) int {
	mul := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mul, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n * mul
}
