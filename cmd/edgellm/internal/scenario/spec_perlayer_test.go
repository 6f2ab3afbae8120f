package scenario

import (
	"math"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestParsePerLayer: a per_layer section parses; bad ones are refused with
// the contender named.
func TestParsePerLayer(t *testing.T) {
	const pol = "policies: [{name: d, builtin: default, per_layer: "
	tests := []struct {
		name, section, engine, want string
	}{
		{"calibrated", "{calibrate_text: t.txt, rule: 'kl:0.01,0.02', tok_target: 2}}]", "", ""},
		{"manifest file", "{manifest: m.json}}]", "native", ""},
		{"neither", "{tok_target: 2}}]", "", "exactly one of manifest or calibrate_text"},
		{"both", "{manifest: m.json, calibrate_text: t.txt}}]", "", "exactly one of manifest or calibrate_text"},
		{"llamacpp", "{manifest: m.json}}]", "llamacpp", "needs the native engine"},
		{"negative target", "{manifest: m.json, tok_target: -1}}]", "", "tok_target -1"},
		{"unknown key", "{manifests: m.json}}]", "", "field manifests not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := strings.Replace(goodSpec, "policies: [{name: d, builtin: default}]", pol+tc.section, 1)
			if tc.engine != "" {
				spec += "engine: " + tc.engine + "\n"
			}
			s, err := Parse(strings.NewReader(spec), "/x")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%v\nspec:\n%s", err, spec)
			case tc.want == "" && s.Policies[0].PerLayer == nil:
				t.Fatal("per_layer dropped")
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want it to mention %q", err, tc.want)
			case tc.want != "" && !strings.Contains(tc.want, "not found") && !strings.Contains(err.Error(), "(d).per_layer"):
				t.Fatalf("err %v does not name the contender's per_layer", err)
			}
		})
	}
}

// TestLayerBytesBits: with every layer on set 0 the mixed bits/weight is
// tier 0's (the file's tensor data, up to its alignment padding); moving
// layers to smaller sets lowers it step by step; an assignment that does
// not fit the model is 0.
func TestLayerBytesBits(t *testing.T) {
	var tiers []Tier
	for _, name := range []string{"Q8_0", "Q5_0", "Q4_0"} {
		p := sharedtest.Path(t, "models/derived/stories260K-ff192-"+name+".gguf")
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		tiers = append(tiers, Tier{Path: p, BitsPerWeight: float64(f.DataSize()) * 8 / float64(f.ParamCount())})
	}
	lb, err := loadLayerBytes(tiers)
	if err != nil {
		t.Fatal(err)
	}
	n := len(lb.perTier[0])
	if n != 5 {
		t.Fatalf("%d layers, want stories260K's 5", n)
	}
	sets := make([]int, n)
	b0 := lb.bits(sets)
	// Padding: each tensor's data is aligned to 32 bytes in the file, so
	// the file's figure exceeds the tensors' by < 32 bytes per tensor.
	pad := 32 * 8 * float64(n*9+3) / float64(lb.params)
	if d := tiers[0].BitsPerWeight - b0; d < 0 || d > pad {
		t.Errorf("all on set 0: %.4f bits/weight, the file's %.4f (allowed padding %.4f)", b0, tiers[0].BitsPerWeight, pad)
	}
	prev := b0
	for k := 1; k <= 2; k++ {
		for l := range sets {
			sets[l] = k
			b := lb.bits(sets)
			if !(b < prev) {
				t.Errorf("layer %d to set %d: %.4f bits/weight, not below %.4f", l, k, b, prev)
			}
			prev = b
		}
	}
	if b := lb.bits(sets[:n-1]); b != 0 {
		t.Errorf("short assignment: %g, want 0", b)
	}
	if b := lb.bits([]int{0, 0, 0, 0, 3}); b != 0 || math.IsNaN(b) {
		t.Errorf("set 3 of 3: %g, want 0", b)
	}
}

// TestTierPosition: a per-layer run's bits/weight sit on the tier chart's
// axis between the tiers they fall between.
func TestTierPosition(t *testing.T) {
	tiers := []Tier{{BitsPerWeight: 8.5}, {BitsPerWeight: 5.5}, {BitsPerWeight: 4.5}}
	for _, tc := range []struct{ bits, want float64 }{
		{9, 0}, {8.5, 0}, {7, 0.5}, {5.5, 1}, {5, 1.5}, {4.5, 2}, {3, 2},
	} {
		if got := tierPosition(tiers, tc.bits); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("tierPosition(%g) = %g, want %g", tc.bits, got, tc.want)
		}
	}
}
