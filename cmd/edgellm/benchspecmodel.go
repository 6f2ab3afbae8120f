package main

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/synth"
)

// The model behind `bench --spec`: loaded through host (the native engine,
// with --layer-sets for self:TYPE drafts), except the SYNTHETIC
// acceptance-controlled pair of --synth-from/--synth-agree: a private copy
// of the model whose layers ≥ N add nothing (synth.ZeroFrom: a skip:N
// draft then proposes the target's own token) and drafts whose proposals
// are SIMULATED misses at a 1 − agree share of positions
// (native.Options.SynthAgree): model-file tools like `synth`, deliberately
// not options of the public host.LoadOptions.

// loadSpecModel loads the target model of bench --spec (with bench's
// --repack, the repacked weights' kernels: their batch costs set v(n)).
func loadSpecModel(path string, so benchSpecOptions, threads int, repack bool) (host.Engine, error) {
	if so.SynthAgree == 0 && so.SynthFrom == 0 {
		return host.Load(path, host.LoadOptions{Engine: "native", LayerSets: so.LayerSets, Repack: repack})
	}
	if so.SynthAgree <= 0 || so.SynthAgree > 1 || so.SynthFrom < 1 {
		return nil, usagef("--synth-from N (≥ 1) and --synth-agree P (0 < P ≤ 1) go together (got %d and %g)", so.SynthFrom, so.SynthAgree)
	}
	dir, err := os.MkdirTemp("", "edgellm-synth-pair")
	if err != nil {
		return nil, err
	}
	// The copy is mapped by the engine; its name can go at once.
	defer os.RemoveAll(dir)
	pair := filepath.Join(dir, "target.gguf")
	if err := synth.ZeroFrom(path, pair, so.SynthFrom); err != nil {
		return nil, err
	}
	return native.Load(pair, native.Options{Threads: threads, ExtraSets: so.LayerSets, Repack: repack, SynthAgree: so.SynthAgree})
}

// attachBenchDraft is host.AttachDraft with --spec's usage errors.
func attachBenchDraft(eng host.Engine, sess host.Session, o host.DraftOptions) (*host.Draft, error) {
	d, err := host.AttachDraft(eng, sess, o)
	if errors.Is(err, host.ErrDraftSpec) {
		return nil, usagef("--spec: %v", err)
	}
	return d, err
}

// checkSpecDraft attaches the draft to a throwaway session, so a bad --spec
// (unparsable, more layers than the model, a missing weight set or draft
// file) fails before anything is measured.
func checkSpecDraft(eng host.Engine, so benchSpecOptions, nCtx int) error {
	s, err := eng.NewSession(host.SessionConfig{NCtx: nCtx, Threads: 1})
	if err != nil {
		return err
	}
	defer s.Close()
	d, err := attachBenchDraft(eng, s, host.DraftOptions{Spec: so.Spec, Sampling: host.SamplingParams{TopP: 1, RepeatPenalty: 1}})
	if err != nil {
		return err
	}
	return d.Close()
}
