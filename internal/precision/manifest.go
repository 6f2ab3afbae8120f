package precision

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// Schema names the manifest format; Version is the schema version this code
// reads and writes. A manifest with another schema or version is refused.
const (
	Schema  = "edgellm.precision-manifest"
	Version = 1
	// MaxLayers is the most layers a manifest may describe (the policy ABI's
	// per-layer arrays hold 128).
	MaxLayers = 128
)

// Errors; every load or validation error wraps one of these.
var (
	ErrSchema   = errors.New("unknown precision manifest schema")
	ErrVersion  = errors.New("unsupported precision manifest version")
	ErrModel    = errors.New("precision manifest is for another model")
	ErrInvalid  = errors.New("invalid precision manifest")
	ErrTooLarge = errors.New("too many layers")
	ErrDigest   = errors.New("precision manifest content digest")
)

// Manifest is the precision manifest: what calibration learnt about each
// layer's tolerance to fewer bits. See docs/PRECISION-MANIFEST.md.
type Manifest struct {
	Schema  string `json:"schema"`
	Version int    `json:"version"`
	// ContentDigest is "sha256:<hex>" over the manifest's own canonical
	// encoding (Go's JSON of every field, this one empty): Marshal writes
	// it and Parse refuses a manifest whose content does not match, so a
	// hand-edited manifest (a raised min_bits, a changed KL) is refused
	// until it is re-digested on purpose (`edgellm manifest-digest --write`).
	ContentDigest string      `json:"content_digest"`
	Model         Model       `json:"model"`
	Calibration   Calibration `json:"calibration"`
	Sets          []Set       `json:"sets"`
	Layers        []Layer     `json:"layers"`
}

// Digest computes m's content digest (ContentDigest ignored).
func (m *Manifest) Digest() string {
	c := *m
	c.ContentDigest = ""
	b, err := json.Marshal(&c)
	if err != nil { // only for NaN or ±Inf, which Validate refuses first
		return "sha256:invalid"
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CheckDigest reports whether ContentDigest matches the content.
func (m *Manifest) CheckDigest() error {
	got := m.Digest()
	switch {
	case m.ContentDigest == "":
		return fmt.Errorf("%w: none recorded (written by hand or by an older edgellm?); record it again (Manifest.Write records the digest of what it writes) after checking it", ErrDigest)
	case m.ContentDigest != got:
		return fmt.Errorf("%w mismatch (recorded %s, content %s): the manifest was edited after it was written; write it again (Manifest.Write) if the edit is intended", ErrDigest, short(m.ContentDigest), short(got))
	}
	return nil
}

// Model identifies the model a manifest was made for.
type Model struct {
	// Digest is "sha256:<hex>" over the model's identity: architecture,
	// hyper-parameters, tensor names and shapes and the vocabulary, not the
	// tensor types or data, so every precision of one model shares it.
	Digest string `json:"digest"`
	Arch   string `json:"arch"`
	Name   string `json:"name,omitempty"`
	Layers int    `json:"layers"`
}

// Calibration records how the numbers were measured.
type Calibration struct {
	Text       string  `json:"text"`        // file name of the calibration text
	TextDigest string  `json:"text_digest"` // "sha256:<hex>" of its bytes
	Tokens     int     `json:"tokens"`      // tokens teacher-forced
	Scored     int     `json:"scored"`      // positions scored (next token known)
	BasePPL    float64 `json:"base_ppl"`    // perplexity of the base set on the text
	Rule       string  `json:"rule"`        // the min_bits rule (Rule.String)
	Seconds    float64 `json:"seconds"`     // time taken
	Created    string  `json:"created"`     // RFC 3339, UTC
	ClampSigma float64 `json:"clamp_sigma"` // K of the clamp thresholds (±Kσ)
	Tool       string  `json:"tool,omitempty"`
}

// Set is one weight set (precision) of the model that was calibrated.
type Set struct {
	File          string  `json:"file"`
	Type          string  `json:"type"`            // "q8_0", "f32", "mixed"
	Bits          int     `json:"bits"`            // nominal: bits_per_weight rounded down
	BitsPerWeight float64 `json:"bits_per_weight"` // block scales included
	Base          bool    `json:"base,omitempty"`  // the reference all KLs are against
}

// Layer is one transformer block's entry.
type Layer struct {
	Layer int `json:"layer"`
	// MinBits is the fewest bits the rule allows for this layer; MaxBits the
	// most worth spending (the base set's). MinBits ≤ MaxBits.
	MinBits int `json:"min_bits"`
	MaxBits int `json:"max_bits"`
	// SensRank orders layers by sensitivity: 0 is the most sensitive (the
	// largest KL at the lowest calibrated precision).
	SensRank   int         `json:"sens_rank"`
	Precisions []Precision `json:"precisions"`
	Weights    WeightStats `json:"weights"`
	Clamp      Clamp       `json:"clamp"`
}

// Precision is what setting only this layer to one set did on the text.
type Precision struct {
	Bits         int     `json:"bits"`
	Set          string  `json:"set"`            // file of the set
	KL           float64 `json:"kl"`             // mean KL(base ‖ this) per position, nats
	PPLChangePct float64 `json:"ppl_change_pct"` // (ppl / base ppl − 1) × 100
}

// WeightStats describes the base set's weights of the layer's matrices.
type WeightStats struct {
	Sigma float64 `json:"sigma"` // standard deviation
	// OutlierShare is the share of the layer's weights whose magnitude is
	// beyond the model-wide 99.9th percentile of |w| (the model average is
	// 0.001; a layer above it holds more than its share of outliers).
	OutlierShare float64 `json:"outlier_share"`
	// P999Sigma is the layer's own 99.9th percentile of |w| in units of σ.
	P999Sigma float64 `json:"p999_sigma"`
	// Sampled is the number of weights the percentiles were estimated from.
	Sampled int64 `json:"sampled"`
}

// Clamp holds the outlier clamp thresholds of a layer: weights beyond
// ±Threshold (= K σ) would be clamped before quantizing.
type Clamp struct {
	Threshold float64 `json:"threshold"`
	// ShareBeyond is the share of the layer's weights beyond Threshold.
	ShareBeyond float64 `json:"share_beyond"`
	// Flagged marks layers holding at least twice the model average share of
	// outliers (OutlierShare ≥ 0.002): the candidates for clamping.
	Flagged bool `json:"flagged"`
	// Applied is true once `edgellm quantize --clamp-outliers` clamped it.
	Applied bool `json:"applied,omitempty"`
}

// Validate checks the manifest on its own: schema, version, layer count,
// layer numbering, bits and ranks.
func (m *Manifest) Validate() error {
	if m.Schema != Schema {
		return fmt.Errorf("%w %q (want %q)", ErrSchema, m.Schema, Schema)
	}
	if m.Version != Version {
		return fmt.Errorf("%w %d (this build reads version %d)", ErrVersion, m.Version, Version)
	}
	n := m.Model.Layers
	if n > MaxLayers {
		return fmt.Errorf("%w: model has %d layers, the policy ABI holds at most %d", ErrTooLarge, n, MaxLayers)
	}
	if n < 1 || len(m.Layers) != n {
		return fmt.Errorf("%w: %d layer entries for a model of %d layers", ErrInvalid, len(m.Layers), n)
	}
	ranks := make([]bool, n)
	for i, l := range m.Layers {
		if l.Layer != i {
			return fmt.Errorf("%w: entry %d is for layer %d", ErrInvalid, i, l.Layer)
		}
		if l.MinBits < 1 || l.MaxBits > 255 {
			return fmt.Errorf("%w: layer %d: bits %d-%d outside 1-255", ErrInvalid, i, l.MinBits, l.MaxBits)
		}
		if l.MinBits > l.MaxBits {
			return fmt.Errorf("%w: layer %d: min_bits %d above max_bits %d", ErrInvalid, i, l.MinBits, l.MaxBits)
		}
		if l.SensRank < 0 || l.SensRank >= n || ranks[l.SensRank] {
			return fmt.Errorf("%w: layer %d: sens_rank %d is not a distinct rank in [0, %d)", ErrInvalid, i, l.SensRank, n)
		}
		ranks[l.SensRank] = true
		for _, p := range l.Precisions {
			if !(p.KL >= 0) || math.IsInf(p.KL, 0) || math.IsNaN(p.PPLChangePct) || math.IsInf(p.PPLChangePct, 0) {
				return fmt.Errorf("%w: layer %d on %s: KL %v, perplexity change %v%% (a KL is finite and ≥ 0)", ErrInvalid, i, p.Set, p.KL, p.PPLChangePct)
			}
		}
	}
	return nil
}

// Check validates m and checks it was made for the model with this digest
// and layer count.
func (m *Manifest) Check(digest string, layers int) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if m.Model.Digest != digest || m.Model.Layers != layers {
		return fmt.Errorf("%w: manifest model %s (%d layers), loaded model %s (%d layers)",
			ErrModel, short(m.Model.Digest), m.Model.Layers, short(digest), layers)
	}
	return nil
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}

// Parse decodes and validates a manifest (unknown fields are refused, so a
// typo cannot silently drop a setting).
func Parse(data []byte) (*Manifest, error) {
	var probe struct {
		Schema  string `json:"schema"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// Schema and version first: a future version may have other fields.
	if probe.Schema != Schema {
		return nil, fmt.Errorf("%w %q (want %q)", ErrSchema, probe.Schema, Schema)
	}
	if probe.Version != Version {
		return nil, fmt.Errorf("%w %d (this build reads version %d)", ErrVersion, probe.Version, Version)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if err := m.CheckDigest(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Load reads and validates the manifest at path; errors name the file.
func Load(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Marshal validates m, records its content digest and encodes it
// (indented, with a final newline).
func (m *Manifest) Marshal() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	m.ContentDigest = m.Digest()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Write validates m and writes it to path atomically: a temporary file in
// the same directory, synced, then renamed over path. On error nothing is
// left behind.
func (m *Manifest) Write(path string) error {
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, b)
}

// WriteFileAtomic writes data to path through a temporary file and a rename.
func WriteFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return nil
}

// Ranks returns sensitivity ranks for scores (larger = more sensitive):
// rank 0 is the largest score; ties keep layer order.
func Ranks(scores []float64) []int {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	r := make([]int, len(scores))
	for rank, i := range idx {
		r[i] = rank
	}
	return r
}
