package main

import (
	"errors"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/native"
)

// The model behind `bench --spec`: loaded through host (the native engine,
// with --layer-sets for self:TYPE drafts), except the SYNTHETIC
// acceptance-controlled pairs of --synth-from/--synth-eps/--synth-agree,
// which rewrite the model's weights as they are mapped: a model-file tool
// like `synth`, deliberately not an option of the public host.LoadOptions.

// loadSpecModel loads the target model of bench --spec (with bench's
// --repack, the repacked weights' kernels, and with --kernels edgellm
// edgellm's: their batch costs set v(n)).
func loadSpecModel(path string, so benchSpecOptions, threads int, repack bool, kern string) (host.Engine, error) {
	if so.SynthEps == 0 && so.SynthAgree == 0 {
		return host.Load(path, host.LoadOptions{Engine: "native", LayerSets: so.LayerSets, Repack: repack, Kernels: kern})
	}
	return native.Load(path, native.Options{Threads: threads, ExtraSets: so.LayerSets, Repack: repack, Kernels: kern,
		SynthScaleFrom: so.SynthFrom, SynthEps: so.SynthEps, SynthAgree: so.SynthAgree})
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
