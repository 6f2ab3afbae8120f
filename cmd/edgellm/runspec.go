package main

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host"
	"github.com/spf13/pflag"
)

// Speculative decoding for `edgellm run` (native engine): --draft SPEC
// picks the draft (skip:N, self:TYPE, ngram or a GGUF file), --spec-k its
// length (N, or auto: chosen each round from measured acceptance and
// costs). run.go hooks it in with a flag registration, an options field and
// one call.

func addSpecFlags(fs *pflag.FlagSet) {
	fs.String("draft", "", "speculative decoding draft (native engine): skip:N (first N layers), self:TYPE (a --layer-sets weight set, e.g. self:q4_0), ngram (prompt lookup) or a smaller GGUF with the same vocabulary")
	fs.String("spec-k", "4", "draft tokens per round with --draft: 1-8, or auto")
}

type specOptions struct {
	Draft string `koanf:"draft"`
	SpecK string `koanf:"spec-k"`
}

// parseSpecK returns K (clamped to 1..MaxSpecK, with a notice) or auto.
func parseSpecK(c *cmdEnv, v string) (int, bool, error) {
	if strings.TrimSpace(v) == "auto" {
		return 0, true, nil
	}
	k, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || k < 0 {
		return 0, false, usagef("--spec-k %q: want a number of draft tokens or auto", v)
	}
	if k > abi.MaxSpecK {
		c.Logf("--spec-k %d is above the maximum %d: using %d", k, abi.MaxSpecK, abi.MaxSpecK)
		k = abi.MaxSpecK
	}
	return k, false, nil
}

// attachDraft resolves --draft against the session (host.AttachDraft);
// with a policy, K is the policy's.
func attachDraft(c *cmdEnv, o specOptions, adapter *host.Adapter, eng host.Engine, sess host.Session, sp host.SamplingParams) (*host.Draft, error) {
	k, auto, err := parseSpecK(c, o.SpecK)
	if err != nil {
		return nil, err
	}
	d, err := host.AttachDraft(eng, sess, host.DraftOptions{Spec: o.Draft, K: k, Auto: auto, Sampling: sp, Policy: adapter})
	switch {
	case errors.Is(err, host.ErrDraftEngine):
		return nil, usagef("--draft needs the native engine (this model runs on %s)", eng.Name())
	case errors.Is(err, host.ErrDraftSpec):
		return nil, usagef("--draft: %v", err)
	}
	return d, err
}

// endLine ends the generated text with a newline, as a plain run does.
func endLine(out *bufio.Writer, err error) error {
	fmt.Fprintln(out)
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	return err
}

// runSpec generates with speculative decoding (host.Generate with a
// Draft) and prints the acceptance, mean accepted length and draft/verify
// time split at the end. gen carries run's prompt, output and step hook;
// stats (nil: no --stats-json) gets the start, one round record per
// speculative round and the end.
func runSpec(c *cmdEnv, o specOptions, adapter *host.Adapter, swaps bool, eng host.Engine, sess host.Session, gen host.GenerateOptions, stats *runStats) error {
	if swaps {
		return usagef("--draft and --swap-at cannot be combined")
	}
	if gen.OnLogits != nil {
		return usagef("--draft and --logits-out cannot be combined: speculative rounds sample inside the draft")
	}
	s, err := attachDraft(c, o, adapter, eng, sess, gen.Sampling)
	if err != nil {
		return err
	}
	defer s.Close()
	kDesc := fmt.Sprint(s.K()) // the K in force: --spec-k after clamping
	if strings.TrimSpace(o.SpecK) == "auto" {
		kDesc = "auto"
	}
	c.Logf("speculative decoding: draft %s, K %s, draft KV %d bytes", o.Draft, kDesc, s.KVBytes())
	if bi := s.BatchInvariance(); gen.Sampling.Greedy() && !bi.Exact {
		fix := "edgellm's kernels, which would make it exact, take only Q8_0, Q4_0, F32 and F16 matrices that are not repacked"
		if bi.EdgellmFixes {
			fix = "--kernels edgellm makes it exact (plain decoding then uses those kernels too)"
		}
		c.Logf("speculative decoding: greedy text may differ from plain decoding where the top two logits nearly tie: verify batches are not batch-invariant for %s; %s", bi.Reason, fix)
	}
	gen.Draft = s
	rounds := roundStats{stats: stats, d: s}
	gen.BeforeStep = rounds.hook(gen.BeforeStep)
	stats.begin(len(gen.Prompt), adapter)
	gs, err := host.Generate(c.Ctx, sess, gen)
	rounds.record(gs.GeneratedTokens)
	stats.end(gs, err)
	if err != nil {
		return err
	}
	st := s.Stats()
	c.Logf("\nprefill: %d tokens in %s (%.1f tok/s); decode: %d tokens, %.1f tok/s steady state (first round excluded)%s",
		gs.PromptTokens, ms(gs.Prefill), gs.PrefillTPS(), gs.GeneratedTokens, gs.DecodeTPS(), eogNote(gs))
	total := st.DraftTime + st.VerifyTime
	share := 0.0
	if total > 0 {
		share = 100 * st.DraftTime.Seconds() / total.Seconds()
	}
	if adapter != nil {
		ps := adapter.Stats()
		c.Logf("policy: %d calls, %d changes, %d failures, %s in policy calls", ps.Calls, ps.Changes, ps.Failures, ms(ps.PolicyTime))
	}
	c.Logf("speculation: acceptance %.3f (%d/%d drafts), mean accepted length %.2f per round, %d rounds, %d plain steps, K %d at the end; draft %s (%.0f%%), verify %s",
		st.Acceptance(), st.Accepted, st.Drafted, st.MeanAccepted(), st.Rounds, st.PlainSteps, s.K(), ms(st.DraftTime), share, ms(st.VerifyTime))
	return nil
}
