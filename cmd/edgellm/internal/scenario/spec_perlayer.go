package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgellm/edgellm/internal/gguf"
)

// PerLayer is a contender that runs on tier 0 with the lower tiers mapped
// as per-layer weight sets (`run -m TIER0 --layer-sets TIER1,…`, native
// engine) and a precision manifest, so a policy with a per-layer
// controller moves single layers instead of the whole model. Its bits per
// weight are computed per token from the layers' sets (the engine's "sets"
// records in stats.jsonl).
type PerLayer struct {
	// Manifest is a precision manifest file for tier 0; "" = the runner
	// makes one with `edgellm calibrate` on CalibrateText before the run.
	Manifest      string `yaml:"manifest"`
	CalibrateText string `yaml:"calibrate_text"`
	// Rule is calibrate's min_bits rule ("" = its default).
	Rule string `yaml:"rule"`
	// TokTarget is the throughput target the app gives the policy (run
	// --tok-target; 0 = the policy's own default).
	TokTarget float32 `yaml:"tok_target"`
}

func (pl *PerLayer) validate(s *Spec) error {
	switch {
	case s.Engine == "llamacpp":
		return errors.New("needs the native engine (weight sets), not engine llamacpp")
	case s.Serve != nil:
		return errors.New("not supported in serve mode")
	case (pl.Manifest == "") == (pl.CalibrateText == ""):
		return errors.New("give exactly one of manifest or calibrate_text")
	case pl.TokTarget < 0:
		return fmt.Errorf("tok_target %g: want ≥ 0", pl.TokTarget)
	}
	return nil
}

// perLayerManifest returns the manifest file of p: its own, or one
// calibrated on tier 0 and the lower tiers into dir (once per run of the
// scenario: the runner reuses it for every contender with the same text
// and rule).
func (r *runner) perLayerManifest(ctx context.Context, p Policy, dir string) (string, error) {
	pl := p.PerLayer
	if pl.Manifest != "" {
		m := r.s.path(pl.Manifest)
		if _, err := os.Stat(m); err != nil {
			return "", fmt.Errorf("policy %s: per_layer.manifest: %w", p.Name, err)
		}
		return m, nil
	}
	key := pl.CalibrateText + "\x00" + pl.Rule
	if m, ok := r.manifests[key]; ok {
		return m, nil
	}
	out := filepath.Join(dir, "manifest-"+strconv.Itoa(len(r.manifests))+".json")
	sets := make([]string, 0, len(r.tiers)-1)
	for _, t := range r.tiers[1:] {
		sets = append(sets, t.Path)
	}
	args := []string{"calibrate", r.tiers[0].Path, "--sets", strings.Join(sets, ","), "--text", r.s.path(pl.CalibrateText), "-o", out}
	if pl.Rule != "" {
		args = append(args, "--rule", pl.Rule)
	}
	r.o.Logf("scenario: policy %s: calibrating a precision manifest on %s", p.Name, pl.CalibrateText)
	cmd := exec.CommandContext(ctx, r.o.Exe, args...)
	cmd.Env = append(os.Environ(), r.o.Env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", fmt.Errorf("policy %s: calibrate: %w: %s", p.Name, err, lastOf(string(b)))
	}
	if r.manifests == nil {
		r.manifests = map[string]string{}
	}
	r.manifests[key] = out
	return out, nil
}

func lastOf(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// layerBytes is, per tier, the tensor bytes of each layer (blk.N.*), and
// tier 0's other tensors and parameter count: what a mixed assignment's
// bits per weight are made of.
type layerBytes struct {
	perTier [][]int64
	other   int64
	params  int64
}

// loadLayerBytes reads the tiers' tensor tables.
func loadLayerBytes(tiers []Tier) (*layerBytes, error) {
	lb := &layerBytes{}
	for k, t := range tiers {
		f, err := gguf.Open(t.Path)
		if err != nil {
			return nil, err
		}
		var per []int64
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			rest, ok := strings.CutPrefix(ti.Name, "blk.")
			n, _, _ := strings.Cut(rest, ".")
			l, err := strconv.Atoi(n)
			if !ok || err != nil || l < 0 {
				if k == 0 {
					lb.other += ti.Size
				}
				continue
			}
			for len(per) <= l {
				per = append(per, 0)
			}
			per[l] += ti.Size
		}
		if k == 0 {
			lb.params = f.ParamCount()
		} else if len(per) != len(lb.perTier[0]) {
			return nil, fmt.Errorf("%s: %d layers, tier 0 has %d", t.Path, len(per), len(lb.perTier[0]))
		}
		lb.perTier = append(lb.perTier, per)
	}
	if lb.params == 0 {
		return nil, fmt.Errorf("%s: no parameters", tiers[0].Path)
	}
	return lb, nil
}

// bits is the bits per weight of the model with layer l in set sets[l]
// (set k = tier k); 0 when sets does not fit the model.
func (lb *layerBytes) bits(sets []int) float64 {
	if len(sets) != len(lb.perTier[0]) {
		return 0
	}
	total := lb.other
	for l, k := range sets {
		if k < 0 || k >= len(lb.perTier) {
			return 0
		}
		total += lb.perTier[k][l]
	}
	return float64(total) * 8 / float64(lb.params)
}

// preparePerLayer returns the manifest of p and reads the tiers' layer
// sizes (once).
func (r *runner) preparePerLayer(ctx context.Context, p Policy) (string, error) {
	m, err := r.perLayerManifest(ctx, p, r.o.OutDir)
	if err != nil {
		return "", err
	}
	if r.layers == nil {
		if r.layers, err = loadLayerBytes(r.tiers); err != nil {
			return "", fmt.Errorf("policy %s: %w", p.Name, err)
		}
	}
	return m, nil
}
