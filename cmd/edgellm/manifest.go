package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/edgellm/edgellm/host"
)

// The precision manifest for `edgellm run` (docs/PRECISION-MANIFEST.md):
// --manifest FILE, else one embedded in the model's GGUF metadata by
// `calibrate --embed`. It is checked against the loaded model (digest and
// layer count), its schema version and its bits; any mismatch stops the run
// with one line. run.go hooks it in with three lines:
//
//	addManifestFlags(fs)                  // in the command's Flags
//	manifestOptions `koanf:",squash"`     // in runOptions
//	man, err := o.loadManifest(c, path)   // after the engine is loaded
//
// With --policy, the manifest's per-layer min/max bits and sensitivity
// ranks reach the policy as ABI 1.2 sensors (host.Adapter.SetManifest), and
// --tok-target as tok_per_sec_target.
func addManifestFlags(fs *pflag.FlagSet) {
	fs.String("manifest", "", "precision manifest (JSON, from 'edgellm calibrate'); default: the one embedded in the model, if any")
	fs.Float32("tok-target", 0, "throughput target the policy sees (tok/s, ABI 1.2 tok_per_sec_target; 0 = none: the policy's default)")
}

type manifestOptions struct {
	Manifest  string  `koanf:"manifest"`
	TokTarget float32 `koanf:"tok-target"`
}

// applyManifest hands the manifest and the throughput target to the policy.
func (o manifestOptions) applyManifest(a *host.Adapter, m *host.Manifest) error {
	if o.TokTarget < 0 {
		return usagef("--tok-target %g: want ≥ 0", o.TokTarget)
	}
	a.SetTokPerSecTarget(o.TokTarget)
	if m == nil {
		return nil
	}
	return a.SetManifest(m)
}

// loadManifest loads and checks the manifest for the model at path
// (host.LoadManifest; nil, nil when there is none). path "" (a tier
// ladder) checks against nothing and refuses --manifest.
func (o manifestOptions) loadManifest(c *cmdEnv, path string) (*host.Manifest, error) {
	if path == "" {
		if o.Manifest != "" {
			return nil, usagef("--manifest needs -m MODEL (with --layer-sets), not a tier ladder")
		}
		return nil, nil
	}
	m, err := host.LoadManifest(path, o.Manifest)
	if err != nil || m == nil {
		if errors.Is(err, host.ErrManifestDigest) {
			err = fmt.Errorf("%w (`edgellm manifest-digest --write FILE` records it again)", err)
		}
		if err != nil && o.Manifest != "" {
			err = fmt.Errorf("--manifest: %w", err)
		}
		return nil, err
	}
	src := o.Manifest
	if src == "" {
		src = path + " (embedded)"
	}
	c.Logf("precision manifest %s: %s", src, describeManifest(m))
	return m, nil
}

// describeManifest is one line: min bits and sensitivity rank per layer.
func describeManifest(m *host.Manifest) string {
	mins, ranks := "", ""
	for i, l := range m.Layers {
		if i > 0 {
			mins += " "
			ranks += " "
		}
		mins += fmt.Sprint(l.MinBits)
		ranks += fmt.Sprint(l.SensRank)
	}
	return fmt.Sprintf("%d layers, min bits [%s], sensitivity rank [%s], rule %s", len(m.Layers), mins, ranks, m.Rule)
}
