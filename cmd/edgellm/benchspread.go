package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/bench"
)

// printHonesty prints what a median hides: the spread of the repeats, the
// CPU the whole process used during decode beside the generating thread's
// rate, and a warning per rate whose repeats disagree by more than
// bench.SpreadLimit.
func printHonesty(w io.Writer, rs ...*bench.Result) {
	if len(rs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "engine\tprefill tok/s min/med/max\tdecode tok/s min/med/max\tdecode tok/s per thread-CPU s\tcores busy in decode (process CPU/wall)\tbench's memory sampler (left out)\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.2f of %d threads\t%.3f\t\n", r.Engine, r.PrefillSpread, r.DecodeSpread, r.DecodeCPUTPS, r.DecodeCores, r.Threads, r.SamplerCores)
	}
	tw.Flush()
	for _, r := range rs {
		for _, m := range r.Warnings() {
			fmt.Fprintln(w, m)
		}
	}
}
