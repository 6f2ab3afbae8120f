package calib

import (
	"fmt"

	"github.com/edgellm/edgellm/internal/precision"
)

// A PathPoint is one assignment on a measured demotion path.
type PathPoint struct {
	Sets    []int   `json:"sets"`     // weight set per layer
	AvgBits float64 `json:"avg_bits"` // mean bits per weight of the layers
	KL      float64 `json:"kl"`       // whole-model KL against the base, measured
}

// MeasurePath walks from every layer on the base set (set 0) down to every
// layer on the set with the fewest bits, one layer move at a time: at each
// step it measures, on the runner's text, the whole model with each single
// move of one layer to any set with fewer bits, and keeps the move with the
// least KL increase per bit saved. Unlike Calibrated's per-layer sum, the
// KL is measured with every layer in place, so interactions between layers
// count. n layers and k sets cost at most n·(k−1) runs a step and
// n·(k−1) steps. progress (may be nil) is called after each step.
func MeasurePath(r *Runner, ref *Reference, sets []precision.Set, n int, progress func(PathPoint)) ([]PathPoint, error) {
	score := func(a []int) (float64, error) {
		if err := r.Sess.SetLayerSets(a); err != nil {
			return 0, err
		}
		sc, err := r.Score(ref)
		return sc.KL, err
	}
	cur := Uniform(n, 0)
	kl := 0.0 // the base against itself
	path := []PathPoint{{Sets: append([]int(nil), cur...), AvgBits: AvgBits(cur, sets), KL: kl}}
	for {
		bestIl, bestSi, bestKL, bestRate := -1, -1, 0.0, 0.0
		for il := range n {
			for si := range sets {
				saved := sets[cur[il]].BitsPerWeight - sets[si].BitsPerWeight
				if saved <= 0 {
					continue
				}
				old := cur[il]
				cur[il] = si
				k, err := score(cur)
				cur[il] = old
				if err != nil {
					return nil, fmt.Errorf("path: layer %d → %s: %w", il, sets[si].File, err)
				}
				if rate := (k - kl) / saved; bestIl < 0 || rate < bestRate {
					bestIl, bestSi, bestKL, bestRate = il, si, k, rate
				}
			}
		}
		if bestIl < 0 {
			return path, nil
		}
		cur[bestIl], kl = bestSi, bestKL
		p := PathPoint{Sets: append([]int(nil), cur...), AvgBits: AvgBits(cur, sets), KL: kl}
		path = append(path, p)
		if progress != nil {
			progress(p)
		}
	}
}

// OnPath is the point of path with the least measured KL among those whose
// average bits are at most budget; ok is false when none is.
func OnPath(path []PathPoint, budget float64) (a []int, ok bool) {
	best := -1
	for i, p := range path {
		if p.AvgBits <= budget+1e-9 && (best < 0 || p.KL < path[best].KL) {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	return append([]int(nil), path[best].Sets...), true
}
