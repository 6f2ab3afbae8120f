package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/bench"
	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/cputime"
)

// `edgellm bench --repack-sweep`: repacked weights as a live choice
// (host.RepackSetter), measured in one process on one engine: for each
// count of repacked units (0, half, all), the switch to it (release or
// repack again, timed), then decode on a fresh session: tok/s over wall
// and over the generating thread's CPU time, the repacked MiB and the
// process RSS. Repeats run the levels in alternating order. With
// --kernels edgellm (on a CPU that runs q4x4) the units' Q4_0 matrices are
// in edgellm's q4x4 layout, released onto the mapped plain blocks.

// repackLevel is one count of repacked units and what was measured at it.
type repackLevel struct {
	k                  int
	wall, cpu          []float64 // per repeat: tok/s, tok/CPU-s
	anonMiB, fileMiB   []float64 // per repeat: RssAnon, RssFile after decode
	release, restore   []float64 // ms of the switches to this level
	releasedMB, backMB float64   // MiB given back / repacked again by one switch here
	mib                float64   // repacked MiB in use at this level
}

func runRepackSweep(c *cmdEnv, path string, o benchOptions, text []byte) error {
	if e, _ := bench.ParseEngine(o.Engine); e == "llamacpp" {
		return usagef("--repack-sweep measures the native engine's repacked layers (llama.cpp repacks all or nothing at load)")
	}
	if o.Compare != "" {
		return usagef("--repack-sweep and --compare cannot be combined")
	}
	eng, err := host.Load(path, host.LoadOptions{Engine: "native", Repack: true, Kernels: o.Kernels})
	if err != nil {
		return err
	}
	defer eng.Close()
	probe, err := eng.NewSession(host.SessionConfig{NCtx: o.Ctx, Threads: o.Threads})
	if err != nil {
		return err
	}
	defer probe.Close()
	rs, ok := probe.(host.RepackSetter)
	if !ok {
		return fmt.Errorf("bench: the %s engine cannot release repacked weights", eng.Name())
	}
	max := rs.RepackState().MaxLayers
	if max == 0 {
		return fmt.Errorf("bench: %s: nothing to repack on this CPU (no eligible weights: %s)", path, strings.Join(host.RepackTypes(), ", "))
	}
	p, err := bench.MakePrompt(eng.Vocab(), string(text), benchText, o.NPrompt)
	if err != nil {
		return err
	}
	levels := []*repackLevel{{k: 0}, {k: max / 2}, {k: max}}
	c.Logf("bench --repack-sweep: %d units (layers, then the head), %d threads, %d prompt + %d generated tokens, %d repeats",
		max, o.Threads, o.NPrompt, o.NPredict, o.Repeats)
	if o.Threads != 1 {
		c.Logf("bench: tok/CPU-s counts the generating thread only; with --threads 1 it is the whole compute")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for rep := 0; rep < o.Repeats; rep++ {
		order := append([]*repackLevel(nil), levels...)
		if rep%2 == 1 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, lv := range order {
			ch, err := rs.SetRepackLayers(lv.k)
			if err != nil {
				return err
			}
			ms := float64(ch.Time.Microseconds()) / 1000
			switch {
			case ch.Released > 0:
				lv.release = append(lv.release, ms)
				lv.releasedMB = float64(ch.ReleasedBytes) / (1 << 20)
			case ch.Restored > 0:
				lv.restore = append(lv.restore, ms)
				lv.backMB = float64(ch.RestoredBytes) / (1 << 20)
			}
			lv.mib = float64(rs.RepackState().Bytes) / (1 << 20)
			wall, cpu, err := repackDecode(eng, p.Tokens, o)
			if err != nil {
				return err
			}
			lv.wall = append(lv.wall, wall)
			lv.cpu = append(lv.cpu, cpu)
			anon, file := processRSS()
			lv.anonMiB = append(lv.anonMiB, float64(anon)/(1<<20))
			lv.fileMiB = append(lv.fileMiB, float64(file)/(1<<20))
			c.Logf("repeat %d, %d units: %.2f tok/s, %.2f tok/CPU-s", rep+1, lv.k, wall, cpu)
		}
	}
	printRepackSweep(c.Stdout, levels, max)
	return nil
}

// repackDecode prefills the prompt on a fresh session and decodes
// o.NPredict tokens greedily; the first step is warm-up (it rebuilds the
// graph after a switch), the rest are timed.
func repackDecode(eng host.Engine, prompt []int32, o benchOptions) (wall, cpu float64, err error) {
	s, err := eng.NewSession(host.SessionConfig{NCtx: o.Ctx, Threads: o.Threads})
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	if err := s.Decode(prompt, host.LogitsLast); err != nil {
		return 0, 0, err
	}
	next := greedyNext(eng, s)
	tok, err := next(len(prompt) - 1)
	if err != nil {
		return 0, 0, err
	}
	var t0 time.Time
	var c0 time.Duration
	for i := 0; i < o.NPredict; i++ {
		if i == 1 {
			t0, c0 = time.Now(), cputime.Thread()
		}
		if err := s.Decode([]int32{tok}, host.LogitsLast); err != nil {
			return 0, 0, err
		}
		if tok, err = next(0); err != nil {
			return 0, 0, err
		}
	}
	n := float64(o.NPredict - 1)
	return n / time.Since(t0).Seconds(), n / (cputime.Thread() - c0).Seconds(), nil
}

// greedyNext returns the greedy choice from the logits of batch index i of
// the session's last decode (one logits buffer, reused).
func greedyNext(eng host.Engine, s host.Session) func(i int) (int32, error) {
	l := make([]float32, eng.Vocab().NVocab())
	return func(i int) (int32, error) {
		if err := s.Logits(i, l); err != nil {
			return 0, err
		}
		return bench.Argmax(l), nil
	}
}

// processRSS is the process's anonymous and file-backed resident memory
// (RssAnon, RssFile of /proc/self/status; zero when unreadable). Released
// repacked units leave the first; the mapped weights that replace them
// fault into the second, which the kernel can drop under pressure.
func processRSS() (anon, file int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "RssAnon:":
			anon = kb << 10
		case "RssFile:":
			file = kb << 10
		}
	}
	return anon, file
}

func printRepackSweep(w io.Writer, levels []*repackLevel, max int) {
	base := bench.Median(levels[0].cpu)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "repacked units\trepacked MiB\tdecode tok/s (min/med/max)\ttok/CPU-s\t÷ none (CPU)\tRSS anon / file MiB\tswitch to it: release / repack ms (median)")
	for _, lv := range levels {
		sw := "—"
		switch {
		case len(lv.release) > 0 && len(lv.restore) > 0:
			sw = fmt.Sprintf("%.1f (%.0f MiB) / %.1f (%.0f MiB)", bench.Median(lv.release), lv.releasedMB, bench.Median(lv.restore), lv.backMB)
		case len(lv.release) > 0:
			sw = fmt.Sprintf("%.1f (%.0f MiB) / —", bench.Median(lv.release), lv.releasedMB)
		case len(lv.restore) > 0:
			sw = fmt.Sprintf("— / %.1f (%.0f MiB)", bench.Median(lv.restore), lv.backMB)
		}
		fmt.Fprintf(tw, "%d of %d\t%.1f\t%.1f / %.1f / %.1f\t%.2f\t%.3f\t%.0f / %.0f\t%s\n", lv.k, max, lv.mib,
			slices.Min(lv.wall), bench.Median(lv.wall), slices.Max(lv.wall), bench.Median(lv.cpu),
			bench.Median(lv.cpu)/base, bench.Median(lv.anonMiB), bench.Median(lv.fileMiB), sw)
	}
	tw.Flush()
	for _, lv := range levels {
		if rel := (slices.Max(lv.wall) - slices.Min(lv.wall)) / bench.Median(lv.wall); len(lv.wall) > 1 && rel > bench.SpreadLimit {
			fmt.Fprintf(w, "warning: %d units: decode tok/s repeats disagree by %.0f%% (limit %.0f%%): the machine was likely busy; tok/CPU-s is the steadier figure at --threads 1\n",
				lv.k, 100*rel, 100*bench.SpreadLimit)
		}
	}
}
