package main

import (
	"fmt"
	"strings"

	"github.com/edgellm/edgellm/host"
	"github.com/spf13/pflag"
)

// Per-layer weight sets for `edgellm run` (native engine): --layer-sets
// names GGUF files of the model at other precisions; the policy's LayerBits
// decisions then pick, per layer, the set of the closest precision.
//
// run.go hooks it in with three lines:
//
//	addLayerSetFlags(fs)                  // in the command's Flags
//	layerSetOptions `koanf:",squash"`     // in runOptions
//	LayerSets: o.LayerSets,               // in host.LoadOptions
func addLayerSetFlags(fs *pflag.FlagSet) {
	fs.StringSlice("layer-sets", nil, "GGUF files of the same model at other precisions (comma-separated): the native engine maps them all and the policy switches precision per layer")
}

type layerSetOptions struct {
	LayerSets []string `koanf:"layer-sets"`
}

// describeLayerSets is one line on the weight sets of eng ("" without sets).
func describeLayerSets(eng host.Engine) string {
	sets := host.WeightSets(eng)
	if sets == nil {
		return ""
	}
	var parts []string
	for i, s := range sets {
		parts = append(parts, fmt.Sprintf("%d: %s (%s, %.2f bits/weight)", i, s.Name, s.Type, s.BitsPerWeight))
	}
	return "weight sets: " + strings.Join(parts, "; ")
}
