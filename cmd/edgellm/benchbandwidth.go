package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/bench"
)

// machineBandwidth measures the memory read bandwidth with 1 .. threads
// readers (best of 3 passes each, over bench.ProbeBytes: at least 1 GiB and
// 4× the last-level cache, so the reads come from DRAM) and prints it with
// the reader that ran; it returns the bandwidth at `threads` readers in
// bytes/s (0 if the probe's buffer cannot be had).
func machineBandwidth(w io.Writer, threads int) float64 {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p, err := bench.NewBandwidthProbe(bench.ProbeBytes())
	if err != nil {
		fmt.Fprintf(w, "memory read bandwidth: %v\n", err)
		return 0
	}
	defer p.Close()
	var bw float64
	for n := 1; n <= threads; n++ {
		if bw, err = p.Read(n, 3); err != nil {
			fmt.Fprintf(w, "memory read bandwidth, %d thread(s): %v\n", n, err)
			return 0
		}
		fmt.Fprintf(w, "memory read bandwidth, %d thread(s): %.1f GB/s (%s reader, %d MiB streamed, best of 3)\n", n, bw/1e9, bench.BandwidthPath(), p.Bytes()>>20)
	}
	return bw
}

// printRoofline prints, per result, the weight bytes a decode step reads
// times the decode rate, against the machine's bandwidth: how close decode
// is to the memory roofline. The bytes are the model file's, an upper bound:
// every weight is read once per token except the token embedding, of which
// one row is read (unless it doubles as the output matrix).
func printRoofline(w io.Writer, weightBytes int64, bw float64, rs ...*bench.Result) {
	for _, r := range rs {
		gbs := float64(weightBytes) * r.DecodeTPS / 1e9
		pct := 0.0
		if bw > 0 {
			pct = 100 * gbs * 1e9 / bw
		}
		fmt.Fprintf(w, "%s decode at %d thread(s): %.1f tok/s × %.0f MiB of weights per token = %.1f GB/s of weights, %.0f%% of the measured %.1f GB/s\n",
			r.Engine, r.Threads, r.DecodeTPS, float64(weightBytes)/(1<<20), gbs, pct, bw/1e9)
	}
}
