package calib

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/edgellm/edgellm/internal/precision"
)

// An Assignment is each layer's weight set (index into the manifest's Sets).

// AvgBits is the mean bits per weight of the layers' matrices under a
// (every llama layer has the same shape, so each layer weighs the same).
func AvgBits(a []int, sets []precision.Set) float64 {
	var s float64
	for _, si := range a {
		s += sets[si].BitsPerWeight
	}
	return s / float64(len(a))
}

// Uniform is every layer on set si.
func Uniform(n, si int) []int {
	a := make([]int, n)
	for i := range a {
		a[i] = si
	}
	return a
}

// cost of a set in 1/32 bit units (Q4_0's 4.5 bits is 144).
func cost(s precision.Set) int { return int(math.Round(s.BitsPerWeight * 32)) }

// klOf is layer il's calibrated KL on set si (0 on the base).
func klOf(m *precision.Manifest, il, si int) float64 {
	if m.Sets[si].Base {
		return 0
	}
	for _, p := range m.Layers[il].Precisions {
		if p.Set == m.Sets[si].File {
			return p.KL
		}
	}
	return math.Inf(1)
}

// Calibrated is the assignment with average bits ≤ budget that minimises the
// sum of the layers' calibrated KLs (the manifest's per-layer numbers,
// assumed additive), with no layer below its min_bits unless even that does
// not fit, solved exactly by dynamic programming over the bit budget. ok is
// false when no assignment fits the budget.
func Calibrated(m *precision.Manifest, budget float64) (a []int, ok bool) {
	return calibrated(m, budget, true)
}

func calibrated(m *precision.Manifest, budget float64, useMin bool) ([]int, bool) {
	n := len(m.Layers)
	capac := int(math.Floor(budget*32*float64(n) + 1e-6))
	if capac < 0 {
		return nil, false
	}
	inf := math.Inf(1)
	// best[c] = least KL sum with total cost exactly c over the layers so far.
	best := make([]float64, capac+1)
	for c := range best {
		best[c] = inf
	}
	best[0] = 0
	choice := make([][]int16, n) // choice[il][c]: set of layer il at total c
	for il := range n {
		next := make([]float64, capac+1)
		ch := make([]int16, capac+1)
		for c := range next {
			next[c] = inf
			ch[c] = -1
		}
		for si, s := range m.Sets {
			if useMin && s.Bits < m.Layers[il].MinBits {
				continue
			}
			k, d := klOf(m, il, si), cost(s)
			for c := 0; c+d <= capac; c++ {
				if v := best[c] + k; v < next[c+d] {
					next[c+d], ch[c+d] = v, int16(si)
				}
			}
		}
		best, choice[il] = next, ch
	}
	bc := -1
	for c, v := range best {
		if !math.IsInf(v, 1) && (bc < 0 || v < best[bc] || (v == best[bc] && c < bc)) {
			bc = c
		}
	}
	if bc < 0 {
		if useMin {
			return calibrated(m, budget, false)
		}
		return nil, false
	}
	a := make([]int, n)
	for il := n - 1; il >= 0; il-- {
		si := int(choice[il][bc])
		a[il] = si
		bc -= cost(m.Sets[si])
	}
	return a, true
}

// Cost is a's total bits in 1/32-bit units: two assignments have exactly
// equal average bits when their costs are equal (no float comparison).
func Cost(a []int, sets []precision.Set) int {
	c := 0
	for _, si := range a {
		c += cost(sets[si])
	}
	return c
}

// UniformAt is the set whose uniform assignment has exactly cost c over n
// layers, or -1 when none has.
func UniformAt(sets []precision.Set, n, c int) int {
	for si, s := range sets {
		if cost(s)*n == c {
			return si
		}
	}
	return -1
}

// NAssignments is len(sets)^n, or -1 beyond MaxExhaustive.
func NAssignments(n, k int) int {
	t := 1
	for range n {
		if t *= k; t > MaxExhaustive {
			return -1
		}
	}
	return t
}

// All is every assignment of n layers over k sets (k^n of them; the caller
// checks NAssignments first), layer 0 varying fastest.
func All(n, k int) [][]int {
	total := NAssignments(n, k)
	out := make([][]int, 0, max(total, 0))
	for code := range total {
		a := make([]int, n)
		for il, c := 0, code; il < n; il, c = il+1, c/k {
			a[il] = c % k
		}
		out = append(out, a)
	}
	return out
}

// RandomAt draws up to k distinct assignments uniformly at random among
// those whose cost is exactly c (rejection sampling; seeded, so the draw is
// reproducible). It returns fewer when 2,000,000 tries find fewer.
func RandomAt(sets []precision.Set, n, c, k int, seed uint64) [][]int {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var out [][]int
	seen := map[string]bool{}
	for tries := 0; len(out) < k && tries < 2_000_000; tries++ {
		a := make([]int, n)
		for i := range a {
			a[i] = rng.IntN(len(sets))
		}
		if key := fmt.Sprint(a); Cost(a, sets) == c && !seen[key] {
			seen[key] = true
			out = append(out, a)
		}
	}
	return out
}
