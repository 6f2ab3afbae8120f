package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/bench"
	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/cputime"
)

// `edgellm bench --kernels-vn`: the native engine's forward pass over a
// batch of n = 1..8 tokens (logits on every row: a verify batch) with
// ggml's kernels, ggml's repacked kernels (--repack) and edgellm's
// (host.LoadOptions.Kernels), all loaded in one process and timed
// interleaved (engine after engine inside every n, n after n inside every
// repeat), with the memory read bandwidth measured in the same run. It
// prints per engine and n the median wall time, v(n) = time(n) ÷ time(1),
// the weight bytes read per second (the model file per batch: an upper
// bound, as printRoofline's), that as a share of the measured bandwidth,
// ggml's time ÷ this engine's, and CPU per batch: at one thread the
// calling thread's CPU time (ggml computes there; the goroutine is locked
// to its OS thread), robust to a loaded machine, with v(n) and ÷ ggml over
// it too; at more threads the process's CPU time (workers spinning at
// barriers included).

// kernelSide is one engine of the sweep.
type kernelSide struct {
	name string
	eng  host.Engine
	sess host.Session
	n0   int
	wall [9][]float64 // seconds per batch, by n
	cpu  [9][]float64 // process CPU seconds per batch, by n
}

func runKernelsVn(c *cmdEnv, path string, o benchOptions) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	threads := o.Threads
	if threads == 0 {
		threads = 2
	}
	type cfg struct {
		name   string
		repack bool
		kern   string
	}
	cfgs := []cfg{{"ggml", false, "ggml"}, {"edgellm", false, "edgellm"}}
	if o.Repack {
		cfgs = append(cfgs, cfg{"ggml:repack", true, "ggml"}, cfg{"edgellm:repack", true, "edgellm"})
	}
	var sides []*kernelSide
	defer func() {
		for _, s := range sides {
			if s.sess != nil {
				s.sess.Close()
			}
			s.eng.Close()
		}
	}()
	prompt := make([]int32, 32)
	for _, k := range cfgs {
		eng, err := host.Load(path, host.LoadOptions{Engine: "native", Repack: k.repack, Kernels: k.kern, Notices: c.Stderr})
		if err != nil {
			return cliLoadError(err)
		}
		s := &kernelSide{name: k.name, eng: eng}
		sides = append(sides, s)
		nv := eng.Info().NVocab
		for i := range prompt {
			prompt[i] = int32(1 + (i*7919)%(nv-1))
		}
		if s.sess, err = eng.NewSession(host.SessionConfig{NCtx: 256, Threads: threads, Attention: o.attention()}); err != nil {
			return err
		}
		if err := s.sess.Decode(prompt, host.LogitsLast); err != nil {
			return err
		}
		s.n0 = s.sess.Len()
	}
	c.Logf("bench: --kernels-vn on %s, %d thread(s), %d repeats, %s attention", path, threads, o.Repeats, o.attention())
	bw := machineBandwidth(c.Stdout, threads)
	clock := cputime.Process
	if threads == 1 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		clock = cputime.Thread
	}
	batch := prompt[:8]
	for rep := range o.Repeats + 1 { // the first pass warms pages and graphs, not kept
		for n := 1; n <= 8; n++ {
			for _, s := range sides {
				c0, t0 := clock(), time.Now()
				if err := s.sess.Decode(batch[:n], host.LogitsAll); err != nil {
					return err
				}
				wall, cpu := time.Since(t0).Seconds(), (clock() - c0).Seconds()
				if rep > 0 {
					s.wall[n] = append(s.wall[n], wall)
					s.cpu[n] = append(s.cpu[n], cpu)
				}
				if err := s.sess.Truncate(s.n0); err != nil {
					return err
				}
			}
		}
	}
	printKernelsVn(c.Stdout, sides, st.Size(), bw, threads, o.Repeats)
	return nil
}

func printKernelsVn(w io.Writer, sides []*kernelSide, weightBytes int64, bw float64, threads, reps int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kernels\tn\tthreads\tms/batch\tv(n)\tGB/s\t% of bw\tggml ÷ this\tCPU ms/batch\tv(n) CPU\tggml ÷ this CPU\t")
	base := sides[0] // ggml's kernels, not repacked
	for _, s := range sides {
		one, oneCPU := bench.Median(s.wall[1]), bench.Median(s.cpu[1])
		for n := 1; n <= 8; n++ {
			t, cpu := bench.Median(s.wall[n]), bench.Median(s.cpu[n])
			gbs := float64(weightBytes) / t / 1e9
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%.1f\t%.0f\t%.3f\t%.2f\t%.2f\t%.3f\t\n", s.name, n, threads, 1e3*t, t/one,
				gbs, 100*gbs*1e9/bw, bench.Median(base.wall[n])/t, 1e3*cpu, cpu/oneCPU, bench.Median(base.cpu[n])/cpu)
		}
	}
	tw.Flush()
	names := make([]string, len(sides))
	for i, s := range sides {
		names[i] = s.name
	}
	clock := "process CPU"
	if threads == 1 {
		clock = "calling thread's CPU"
	}
	fmt.Fprintf(w, "CPU: %s; medians of %d repeats, interleaved (%s); GB/s = model file bytes per batch ÷ time (an upper bound on the weight bytes read); bandwidth %.1f GB/s measured in this run\n",
		clock, reps, strings.Join(names, ", "), bw/1e9)
}
