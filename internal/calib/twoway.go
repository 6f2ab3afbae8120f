package calib

import (
	"fmt"
	"slices"

	"github.com/edgellm/edgellm/internal/precision"
)

// The two-way allocator. The manifest's per-layer KLs are measured with
// every other layer on the base set: they predict well near the base and
// badly near the floor, where the other layers' errors are already there
// (on stories260K, calibrated on 4,296 tokens, the additive choice at 4.7
// bits is 4th of the 5 assignments at those bits on held-out text). So the
// floor is measured too: every layer alone raised from the set with the
// fewest bits to each other set, the KL gain recorded. Each table gives an
// exact least-sum choice within the budget (Calibrated's dynamic
// programming); the two candidates are measured whole on the calibration
// text and the lower one is kept. Cost: n·(k−1) runs for the floor table,
// at most two per budget after that.

// FloorTable is the manifest m with each layer's precisions replaced by
// the KL change, measured by measure, of raising that layer alone from the
// floor set (the fewest bits) to each set, every other layer on the floor:
// negative when raising helps. The floor set's entry is 0; no set is the
// base, so klOf reads every entry. min_bits stay as in m.
func FloorTable(m *precision.Manifest, measure func([]int) (float64, error)) (*precision.Manifest, error) {
	n := len(m.Layers)
	floor := 0
	for si, s := range m.Sets {
		if s.BitsPerWeight < m.Sets[floor].BitsPerWeight {
			floor = si
		}
	}
	all := Uniform(n, floor)
	k0, err := measure(all)
	if err != nil {
		return nil, err
	}
	ft := &precision.Manifest{Sets: slices.Clone(m.Sets)}
	for si := range ft.Sets {
		ft.Sets[si].Base = false
	}
	for il := range n {
		l := precision.Layer{Layer: il, MinBits: m.Layers[il].MinBits, MaxBits: m.Layers[il].MaxBits}
		for si, s := range m.Sets {
			d := 0.0
			if si != floor {
				a := slices.Clone(all)
				a[il] = si
				k, err := measure(a)
				if err != nil {
					return nil, fmt.Errorf("floor table: layer %d on %s: %w", il, s.File, err)
				}
				d = k - k0
			}
			l.Precisions = append(l.Precisions, precision.Precision{Bits: s.Bits, Set: s.File, KL: d})
		}
		ft.Layers = append(ft.Layers, l)
	}
	return ft, nil
}

// TwoWay is the lower, by measure, of Calibrated(m, budget) (the
// top-down table) and Calibrated(floor, budget) (FloorTable's bottom-up
// one); ties keep the top-down choice.
func TwoWay(m, floor *precision.Manifest, budget float64, measure func([]int) (float64, error)) ([]int, error) {
	top, ok := Calibrated(m, budget)
	if !ok {
		return nil, fmt.Errorf("two-way: no assignment within %.2f bits", budget)
	}
	bottom, ok := Calibrated(floor, budget)
	if !ok || slices.Equal(top, bottom) {
		return top, nil
	}
	kt, err := measure(top)
	if err != nil {
		return nil, err
	}
	kb, err := measure(bottom)
	if err != nil {
		return nil, err
	}
	if kb < kt {
		return bottom, nil
	}
	return top, nil
}
