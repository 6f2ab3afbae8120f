package calib

import (
	"fmt"
	"time"

	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/precision"
)

// DefaultClampSigma is the default K of the clamp thresholds (±K σ).
const DefaultClampSigma = 6

// Options configures Calibrate.
type Options struct {
	Rule       precision.Rule // min_bits rule (zero value = precision.DefaultRule)
	ClampSigma float64        // K of the clamp thresholds (0 = DefaultClampSigma)
	Chunk      int            // tokens per teacher-forced chunk (0 = 512, capped at n_ctx_train)
	Threads    int
	// Progress is called after each (layer, set) run: done of total runs.
	Progress func(done, total, layer int, set precision.Set, sc Score)
}

// SetsOf describes the engine's weight sets for a manifest (set 0 = base).
func SetsOf(eng *native.Engine) []precision.Set {
	var out []precision.Set
	for i, si := range eng.Sets() {
		out = append(out, precision.Set{File: si.Name, Type: si.Type, Bits: si.Bits, BitsPerWeight: si.BitsPerWeight, Base: i == 0})
	}
	return out
}

// CheckLayers refuses a model with more layers than the manifest and the
// policy ABI hold.
func CheckLayers(n int) error {
	if n > precision.MaxLayers {
		return fmt.Errorf("%w: model has %d layers, the policy ABI holds at most %d", precision.ErrTooLarge, n, precision.MaxLayers)
	}
	return nil
}

// Calibrate measures, for every layer and every weight set other than the
// base (set 0), the KL against the base and the perplexity change when only
// that layer uses the set, teacher-forcing tokens; then derives min_bits by
// o.Rule and ranks layers by their KL at the lowest precision. The returned
// manifest has Model, Sets, Layers and the measured Calibration fields
// filled; the caller adds the text's name and digest.
func Calibrate(eng *native.Engine, tokens []int32, o Options) (*precision.Manifest, error) {
	start := time.Now()
	cfg := eng.Config()
	if err := CheckLayers(cfg.NLayer); err != nil {
		return nil, err
	}
	if eng.NSets() < 2 {
		return nil, fmt.Errorf("calibrate: need at least one weight set besides the base")
	}
	if o.Rule.Kind == "" {
		o.Rule = precision.DefaultRule
	}
	if o.ClampSigma == 0 {
		o.ClampSigma = DefaultClampSigma
	}
	if o.ClampSigma < 0 {
		return nil, fmt.Errorf("calibrate: clamp sigma %g: want > 0", o.ClampSigma)
	}
	r, err := NewRunner(eng, tokens, o.Chunk, o.Threads)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	base := make([]int, cfg.NLayer)
	if err := r.Sess.SetLayerSets(base); err != nil {
		return nil, err
	}
	ref, err := r.NewReference()
	if err != nil {
		return nil, err
	}
	sets := SetsOf(eng)
	baseBits := sets[0].Bits
	ws, clamps, err := WeightStats(eng.SetWeights(0), o.ClampSigma)
	if err != nil {
		return nil, err
	}
	m := &precision.Manifest{Schema: precision.Schema, Version: precision.Version, Sets: sets}
	w0 := eng.SetWeights(0)
	m.Model = precision.Model{Digest: precision.Digest(w0.File), Arch: cfg.Arch, Layers: cfg.NLayer}
	m.Model.Name, _ = w0.File.GetString("general.name")
	lowest := 1 // the set with the fewest bits: its KL ranks the layers
	for i := 2; i < len(sets); i++ {
		if sets[i].BitsPerWeight < sets[lowest].BitsPerWeight {
			lowest = i
		}
	}
	total, done := cfg.NLayer*(len(sets)-1), 0
	scores := make([]float64, cfg.NLayer)
	for il := range cfg.NLayer {
		l := precision.Layer{Layer: il, MaxBits: baseBits, Weights: ws[il], Clamp: clamps[il]}
		for si := 1; si < len(sets); si++ {
			base[il] = si
			if err := r.Sess.SetLayerSets(base); err != nil {
				return nil, err
			}
			sc, err := r.Score(ref)
			if err != nil {
				return nil, fmt.Errorf("layer %d, set %s: %w", il, sets[si].File, err)
			}
			l.Precisions = append(l.Precisions, precision.Precision{Bits: sets[si].Bits, Set: sets[si].File,
				KL: sc.KL, PPLChangePct: (sc.PPL/ref.PPL() - 1) * 100})
			if si == lowest {
				scores[il] = sc.KL
			}
			done++
			if o.Progress != nil {
				o.Progress(done, total, il, sets[si], sc)
			}
		}
		base[il] = 0
		l.MinBits = o.Rule.MinBits(l.Precisions, baseBits)
		m.Layers = append(m.Layers, l)
	}
	for il, rank := range precision.Ranks(scores) {
		m.Layers[il].SensRank = rank
	}
	m.Calibration = precision.Calibration{Tokens: len(tokens), Scored: r.Scored(), BasePPL: ref.PPL(),
		Rule: o.Rule.String(), ClampSigma: o.ClampSigma, Seconds: time.Since(start).Seconds(),
		Created: time.Now().UTC().Format(time.RFC3339), Tool: "edgellm calibrate"}
	return m, nil
}
