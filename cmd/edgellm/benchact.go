package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/edgellm/edgellm/host"
)

// runActivations is bench --activations: the activation memory of a -p
// token prefill and of the decode step after it on the native engine, by
// ggml's graph allocator and by keeping every intermediate tensor (the
// design's tensor-lifetimes claim; docs/BENCHMARKS.md "Activation memory").
func runActivations(c *cmdEnv, path, label string, o benchOptions) error {
	if o.NPrompt < 1 {
		return usagef("--activations: -p %d, want ≥ 1 prompt tokens", o.NPrompt)
	}
	if o.Engine != "" && o.Engine != "auto" && o.Engine != "native" {
		return usagef("--activations measures the native engine's graphs (--engine %s)", o.Engine)
	}
	eng, err := host.Load(path, host.LoadOptions{Engine: "native"})
	if err != nil {
		return err
	}
	defer eng.Close()
	step := 1
	if err := fitLengths(c, eng.Info().NCtxTrain, length{"n-prompt", "-p", &o.NPrompt}, length{"", "1 decode step", &step}); err != nil {
		return err
	}
	att, err := host.ParseAttention(o.Attention)
	if err != nil {
		return usagef("--attention: %v", err)
	}
	sess, err := eng.NewSession(host.SessionConfig{NCtx: o.NPrompt + 1, NBatch: o.NPrompt, Threads: 1, Attention: att})
	if err != nil {
		return err
	}
	defer sess.Close()
	var rows []host.ActivationMemory
	for _, b := range [][2]int{{o.NPrompt, o.NPrompt}, {1, o.NPrompt + 1}} {
		m, err := host.MeasureActivations(sess, b[0], b[1])
		if err != nil {
			return err
		}
		rows = append(rows, m)
	}
	c.Logf("activations: %s, native engine, %s attention", label, att)
	if o.JSON {
		return json.NewEncoder(c.Stdout).Encode(rows)
	}
	mib := func(b int64) string { return fmt.Sprintf("%.2f", float64(b)/(1<<20)) }
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pass\ttokens\tpositions\ttensors\tkeep-all MiB\tpeak live MiB\tggml-alloc MiB\tkeep-all ÷ alloc\talloc ÷ peak live\t")
	for i, m := range rows {
		pass := "prefill"
		if i == 1 {
			pass = "decode"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%.1f\t%.2f\t\n", pass, m.NTok, m.NKV, m.Tensors, mib(m.KeepAll), mib(m.PeakLive), mib(m.Allocated),
			float64(m.KeepAll)/float64(max(m.Allocated, 1)), float64(m.Allocated)/float64(max(m.PeakLive, 1)))
	}
	return tw.Flush()
}
