package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/cmd/edgellm/internal/runstats"
	"github.com/edgellm/edgellm/host"
	"github.com/spf13/pflag"
)

// Machine-readable statistics of `edgellm run` (--stats-json FILE), in the
// format of cmd/edgellm/internal/runstats, read by `edgellm scenario run` while the
// child runs.

func addRunStatsFlags(fs *pflag.FlagSet) {
	fs.Bool("no-mmap", false, "read weights into anonymous memory instead of mapping the file (memory pressure then cannot be relieved by dropping page cache)")
	fs.Bool("repack", false, "repack eligible weights (Q4_0, IQ4_NL, Q4_K matrices) into ggml's interleaved layouts on either engine: faster matrix products, paid for in anonymous memory the kernel cannot reclaim under pressure (stderr reports how much); with --kernels edgellm on AVX-512 VNNI or AVX2 CPUs the Q4_0 matrices go into edgellm's q4x4 layout instead")
	fs.String("repack-layers", "all", "with --repack on the native engine: units repacked at load, layers from 0 up then the output head (N, or all; 0 = none): the rest read the mapped file until a policy repacks them (ABI 1.4 repack_layers)")
	addKernelsFlag(fs)
	fs.String("willneed-layers", "2", "native engine: leading layers (and the output head) read ahead at load so the first token does not wait on page faults (N, all, or none)")
	fs.String("stats-json", "", "write per-token timestamps, tier and decisions as JSONL to this file (for edgellm scenario)")
	fs.String("logits-out", "", "write the prompt, each generated token and the raw logits it was sampled from to this binary file (internal/logitlog; edgellm scenario measures KL against the highest tier from it)")
}

type runStatsOptions struct {
	NoMmap       bool   `koanf:"no-mmap"`
	Repack       bool   `koanf:"repack"`
	RepackLayers string `koanf:"repack-layers"`
	WillNeed     string `koanf:"willneed-layers"`
	Kernels      string `koanf:"kernels"`
	StatsJSON    string `koanf:"stats-json"`
	LogitsOut    string `koanf:"logits-out"`
}

// parseRepackLayers turns --repack-layers (all, or N ≥ 0; 0 = none) into
// host.LoadOptions.RepackLayers (0 = all, host.RepackNone = none).
func parseRepackLayers(s string, repack bool) (int, error) {
	if s == "" || s == "all" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	switch {
	case err != nil || n < 0:
		return 0, usagef("--repack-layers %q: want all or a count ≥ 0", s)
	case !repack:
		return 0, usagef("--repack-layers %s needs --repack", s)
	case n == 0:
		return host.RepackNone, nil
	}
	return n, nil
}

// parseWillNeed turns --willneed-layers (N ≥ 0, all, none) into
// host.LoadOptions.WillNeedLayers.
func parseWillNeed(s string) (int, error) {
	switch s {
	case "": // a command without the flag: the engine's default
		return 0, nil
	case "all":
		return host.WillNeedAll, nil
	case "none", "0":
		return host.WillNeedNone, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, usagef("--willneed-layers %q: want a count ≥ 0, all or none", s)
	}
	return n, nil
}

// runStats writes the --stats-json file. A nil *runStats does nothing, so
// the run loop calls it unconditionally.
type runStats struct {
	f       *os.File
	w       *runstats.Writer
	tiers   interface{ Tiers() (n, cur int) }
	adapter *host.Adapter
	lat     layerStats
	sets    setStats
}

// openRunStats creates path ("" = no statistics: returns nil).
func openRunStats(path string, eng host.Engine) (*runStats, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--stats-json: %w", err)
	}
	r := &runStats{f: f, w: runstats.NewWriter(f)}
	r.tiers, _ = eng.(interface{ Tiers() (n, cur int) })
	return r, nil
}

func (r *runStats) tier() (n, cur int) {
	if r.tiers == nil {
		return 1, 0
	}
	return r.tiers.Tiers()
}

// begin records the start of generation.
func (r *runStats) begin(promptTokens int, adapter *host.Adapter) {
	if r == nil {
		return
	}
	r.adapter = adapter
	n, cur := r.tier()
	r.w.Start(promptTokens, n, cur, os.Getpid())
}

// token records generated token i. It allocates only for a sets record
// (the layer sets changed: runstats_sets.go).
func (r *runStats) token(i int) {
	if r == nil {
		return
	}
	_, cur := r.tier()
	r.setsBefore(i)
	if r.adapter == nil {
		r.w.TokenLayers(i, cur, nil, r.layers())
		return
	}
	d := r.adapter.Current()
	rd := runstats.Decision{K: int(d.SpecK), Window: int(d.Window), Threads: int(d.Threads), RepackLayers: int(d.RepackLayers)}
	s := r.adapter.LastSensors()
	rd.HasCPU = s.Has(abi.PresentCPUBusy)
	rd.CPUOther, rd.CPUPSIRecent = float64(s.CPUOtherBusy), float64(s.CPUPSISomeRecent)
	rd.HasStepRatio = s.Has(abi.PresentStepBaseline)
	rd.StepRatio = float64(s.StepTimeRatio)
	r.w.TokenLayers(i, cur, &rd, r.layers())
}

// end records the outcome of generation.
func (r *runStats) end(st host.Stats, genErr error) {
	if r == nil {
		return
	}
	var p *runstats.Policy
	if r.adapter != nil {
		a := r.adapter.Stats()
		p = &runstats.Policy{Calls: a.Calls, Changes: a.Changes, Swaps: a.Swaps, Failures: a.Failures}
	}
	r.w.End(st.GeneratedTokens, st.DecodeTPS(), st.Prefill, p, genErr)
}

// Remove closes and deletes the file (a run that failed before it began).
func (r *runStats) Remove() {
	if r == nil {
		return
	}
	r.f.Close()
	os.Remove(r.f.Name())
}

// Close closes the file and reports the first write error.
func (r *runStats) Close() error {
	if r == nil {
		return nil
	}
	err := r.f.Close()
	if werr := r.w.Err(); werr != nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("--stats-json: %w", err)
	}
	return nil
}
