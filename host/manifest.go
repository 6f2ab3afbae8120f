package host

import (
	"fmt"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/precision"
)

// The precision manifest (docs/PRECISION-MANIFEST.md) is what `edgellm
// calibrate` learnt about each layer's tolerance to fewer bits. A policy
// sees three numbers per layer of it (ABI 1.2: LayerMinBits, LayerMaxBits,
// LayerSensRank, through Adapter.SetManifest); Manifest is that part. The
// full record (calibration text, per-precision KL, weight statistics,
// clamps) is the calibrate tool's, in internal/precision.

// Manifest is the part of a precision manifest a policy reads.
type Manifest struct {
	// Rule is the min_bits rule calibration applied ("kl:T4,T56" or
	// "ppl:P").
	Rule string
	// Layers has one entry per transformer block, layer 0 first.
	Layers []ManifestLayer
}

// ManifestLayer is one layer's entry of a Manifest.
type ManifestLayer struct {
	// MinBits is the fewest bits the rule allows for the layer; MaxBits the
	// most worth spending (the base weight set's). MinBits ≤ MaxBits.
	MinBits, MaxBits int
	// SensRank orders the layers by sensitivity: 0 is the most sensitive.
	SensRank int
}

// Errors of LoadManifest; each error wraps one of these (or a file error).
var (
	ErrManifestSchema  = precision.ErrSchema   // not a precision manifest
	ErrManifestVersion = precision.ErrVersion  // a schema version this build does not read
	ErrManifestModel   = precision.ErrModel    // made for another model (digest or layer count)
	ErrManifestInvalid = precision.ErrInvalid  // malformed JSON, bad bits or ranks, unknown fields
	ErrManifestLayers  = precision.ErrTooLarge // more layers than the policy ABI holds (128)
	ErrManifestDigest  = precision.ErrDigest   // its content digest is missing or does not match (edited by hand)
)

// LoadManifest reads the precision manifest for the model file at
// modelPath: the file manifestPath, or with manifestPath "" the manifest
// embedded in the model's metadata by `calibrate --embed` (nil, nil when
// there is none). It is validated (schema, version, bits, ranks) and
// checked against the model (identity digest and layer count); errors name
// the file.
func LoadManifest(modelPath, manifestPath string) (*Manifest, error) {
	f, err := gguf.Open(modelPath)
	if err != nil {
		return nil, err
	}
	n, err := f.GetUint(f.Arch() + ".block_count")
	if err != nil {
		return nil, err
	}
	var m *precision.Manifest
	if manifestPath != "" {
		if m, err = precision.Load(manifestPath); err != nil {
			return nil, err
		}
		if err := m.Check(precision.Digest(f), int(n)); err != nil {
			return nil, fmt.Errorf("%s: %w", manifestPath, err)
		}
	} else if m, err = precision.FromGGUF(f, int(n)); err != nil || m == nil {
		return nil, err
	}
	out := &Manifest{Rule: m.Calibration.Rule, Layers: make([]ManifestLayer, len(m.Layers))}
	for i, l := range m.Layers {
		out.Layers[i] = ManifestLayer{MinBits: l.MinBits, MaxBits: l.MaxBits, SensRank: l.SensRank}
	}
	return out, nil
}
