package calib

import (
	"fmt"
	"slices"

	"github.com/edgellm/edgellm/internal/precision"
)

// Refine starts from Calibrated's assignment (the least sum of the
// manifest's per-layer KLs within budget) and returns, of it and its
// neighbours within budget, the one with the least KL measured by measure
// (the whole model on the calibration text, every layer in place, so
// interactions between layers count). The neighbours are every single
// layer moved to another set, and every pair of layers where one goes one
// set up and the other one set down (sets ordered by bits per weight),
// keeping min_bits whenever Calibrated did. Ties keep the earlier candidate
// (Calibrated's first). It costs one measurement per distinct candidate:
// at most n·(k−1) + n·(n−1) for n layers and k sets.
func Refine(m *precision.Manifest, budget float64, measure func([]int) (float64, error)) ([]int, error) {
	a0, ok := Calibrated(m, budget)
	if !ok {
		return nil, fmt.Errorf("refine: no assignment within %.2f bits", budget)
	}
	n, sets := len(a0), m.Sets
	useMin := true
	for il, si := range a0 {
		useMin = useMin && sets[si].Bits >= m.Layers[il].MinBits
	}
	fits := func(a []int) bool {
		if AvgBits(a, sets) > budget+1e-9 {
			return false
		}
		for il, si := range a {
			if useMin && sets[si].Bits < m.Layers[il].MinBits {
				return false
			}
		}
		return true
	}
	// order: set indices by bits per weight, ascending; rank[si] its place.
	order := make([]int, len(sets))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int {
		switch a, b := sets[x].BitsPerWeight, sets[y].BitsPerWeight; {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	})
	rank := make([]int, len(sets))
	for r, si := range order {
		rank[si] = r
	}
	cands := [][]int{a0}
	for il := range n {
		for si := range sets {
			if si != a0[il] {
				a := slices.Clone(a0)
				a[il] = si
				cands = append(cands, a)
			}
		}
	}
	for up := range n {
		for down := range n {
			ru, rd := rank[a0[up]]+1, rank[a0[down]]-1
			if up == down || ru >= len(order) || rd < 0 {
				continue
			}
			a := slices.Clone(a0)
			a[up], a[down] = order[ru], order[rd]
			cands = append(cands, a)
		}
	}
	best, bestKL := -1, 0.0
	seen := map[string]bool{}
	for i, a := range cands {
		key := fmt.Sprint(a)
		if seen[key] || !fits(a) {
			continue
		}
		seen[key] = true
		kl, err := measure(a)
		if err != nil {
			return nil, err
		}
		if best < 0 || kl < bestKL {
			best, bestKL = i, kl
		}
	}
	return cands[best], nil
}
