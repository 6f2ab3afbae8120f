package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgellm/edgellm/internal/calib"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/precision"
)

// `edgellm quantize --clamp-outliers [--sigma K] [--manifest FILE]`: clamp
// the weights of flagged layers (all layers without a manifest) to ±K σ,
// then quantize the layer matrices with ggml's own row quantization
// (internal/calib.QuantizeClamped). With --manifest, the layers flagged
// there are clamped and the manifest is rewritten (atomically) with each
// clamped layer's threshold and applied = true.
func addClampFlags(fs *pflag.FlagSet) {
	fs.Bool("clamp-outliers", false, "clamp flagged layers' weights to ±K σ before quantizing (ggml row quantization of the layer matrices; other tensors copied)")
	fs.Float64("sigma", calib.DefaultClampSigma, "K for --clamp-outliers")
	fs.String("manifest", "", "precision manifest whose flagged layers are clamped (and which records the thresholds); default: every layer")
}

type clampOptions struct {
	ClampOutliers bool    `koanf:"clamp-outliers"`
	Sigma         float64 `koanf:"sigma"`
	ClampManifest string  `koanf:"manifest"`
}

func runQuantizeClamped(c *cmdEnv, o clampOptions, in, out, typName string) error {
	if !(o.Sigma > 0) {
		return usagef("--sigma %g: want > 0", o.Sigma)
	}
	typ, err := gguf.ParseType(typName)
	if err != nil {
		return usagef("TYPE %q with --clamp-outliers: want a ggml tensor type (q4_0, q5_0, q8_0, …)", typName)
	}
	var m *precision.Manifest
	var layers map[int]bool
	if o.ClampManifest != "" {
		if m, err = precision.Load(o.ClampManifest); err != nil {
			return fmt.Errorf("--manifest: %w", err)
		}
		f, err := gguf.Open(in)
		if err != nil {
			return err
		}
		if err := m.Check(precision.Digest(f), m.Model.Layers); err != nil {
			return fmt.Errorf("--manifest %s: %w", o.ClampManifest, err)
		}
		layers = map[int]bool{}
		for _, l := range m.Layers {
			if l.Clamp.Flagged {
				layers[l.Layer] = true
			}
		}
		if len(layers) == 0 {
			return fmt.Errorf("--manifest %s flags no layer (outlier_share ≥ 0.002): nothing to clamp", o.ClampManifest)
		}
	}
	start := time.Now()
	reps, err := calib.QuantizeClamped(in, out, typ, o.Sigma, layers)
	if err != nil {
		return err
	}
	for _, r := range reps {
		c.Logf("layer %d: σ %.4g, clamped %d of %d weights to ±%.4g (%.4f%%)", r.Layer, r.Sigma, r.Clamped, r.Total, r.Threshold, 100*float64(r.Clamped)/float64(max(r.Total, 1)))
		if m != nil {
			m.Layers[r.Layer].Clamp.Threshold = r.Threshold
			m.Layers[r.Layer].Clamp.Applied = true
		}
	}
	if m != nil {
		m.Calibration.ClampSigma = o.Sigma
		if err := m.Write(o.ClampManifest); err != nil {
			return err
		}
	}
	c.Logf("wrote %s (%s layer matrices, clamped at ±%g σ) in %s", out, typ, o.Sigma, time.Since(start).Round(time.Millisecond))
	return nil
}
