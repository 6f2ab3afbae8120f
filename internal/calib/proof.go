package calib

import (
	"fmt"
	"math"
	"sort"

	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/precision"
)

// RandomDraws is how many random assignments each proof point compares with.
const RandomDraws = 20

// RandomTol is how far (bits per weight) below the calibrated assignment's
// average a random assignment's may be (never above it).
const RandomTol = 0.5

// DefaultBudgets are the average bits per weight the proof is evaluated at.
var DefaultBudgets = []float64{4.5, 4.75, 5, 5.5, 6, 6.5, 7, 8, 8.5, 10, 14}

// Eval is one assignment evaluated on the held-out text.
type Eval struct {
	Sets    []int   `json:"sets"`     // weight set per layer
	AvgBits float64 `json:"avg_bits"` // mean bits per weight of the layers
	KL      float64 `json:"kl"`       // mean KL against the base (all layers on set 0)
	PPL     float64 `json:"ppl"`
}

// Point compares, at one budget, (a) the calibrated assignment, (b) the
// uniform one at the nearest bits and (c) the median of RandomDraws random
// assignments at the same average (in [avg − RandomTol, avg]).
type Point struct {
	Budget     float64 `json:"budget"`
	Calibrated Eval    `json:"calibrated"`
	Uniform    Eval    `json:"uniform"`
	// Random is the draw with the median KL; RandomKLs all of them.
	Random     Eval      `json:"random_median"`
	RandomKLs  []float64 `json:"random_kls"`
	RandomPPLs []float64 `json:"random_ppls"`
}

// Proof is the calibrated-versus-uniform-versus-random comparison.
type Proof struct {
	BasePPL float64 `json:"base_ppl"`
	Scored  int     `json:"scored"`
	Points  []Point `json:"points"`
}

// RunProof evaluates, on tokens (text the manifest was not calibrated on),
// the three assignments at each budget, with the engine's sets in the
// manifest's order. The head stays on the base set throughout.
func RunProof(eng *native.Engine, m *precision.Manifest, tokens []int32, budgets []float64, threads int, seed uint64) (*Proof, error) {
	n := eng.Config().NLayer
	r, err := NewRunner(eng, tokens, 0, threads)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := r.Sess.SetLayerSets(Uniform(n, 0)); err != nil {
		return nil, err
	}
	ref, err := r.NewReference()
	if err != nil {
		return nil, err
	}
	cache := map[string]Eval{}
	eval := func(a []int) (Eval, error) {
		key := fmt.Sprint(a)
		if e, ok := cache[key]; ok {
			return e, nil
		}
		if err := r.Sess.SetLayerSets(a); err != nil {
			return Eval{}, err
		}
		sc, err := r.Score(ref)
		if err != nil {
			return Eval{}, err
		}
		e := Eval{Sets: a, AvgBits: AvgBits(a, m.Sets), KL: sc.KL, PPL: sc.PPL}
		cache[key] = e
		return e, nil
	}
	p := &Proof{BasePPL: ref.PPL(), Scored: r.Scored()}
	for bi, b := range budgets {
		ca, ok := Calibrated(m, b)
		if !ok {
			continue
		}
		pt := Point{Budget: b}
		if pt.Calibrated, err = eval(ca); err != nil {
			return nil, err
		}
		if pt.Uniform, err = eval(NearestUniform(m.Sets, n, pt.Calibrated.AvgBits)); err != nil {
			return nil, err
		}
		draws, err := RandomBelow(m.Sets, n, pt.Calibrated.AvgBits, RandomTol, RandomDraws, seed+uint64(bi))
		if err != nil {
			return nil, fmt.Errorf("budget %.2f: %w", b, err)
		}
		evs := make([]Eval, len(draws))
		for i, a := range draws {
			if evs[i], err = eval(a); err != nil {
				return nil, err
			}
			pt.RandomKLs = append(pt.RandomKLs, evs[i].KL)
			pt.RandomPPLs = append(pt.RandomPPLs, evs[i].PPL)
		}
		sort.Slice(evs, func(i, j int) bool { return evs[i].KL < evs[j].KL })
		pt.Random = evs[(len(evs)-1)/2] // lower median of an even count
		pt.Random.KL = median(pt.RandomKLs)
		pt.Random.PPL = median(pt.RandomPPLs)
		p.Points = append(p.Points, pt)
	}
	return p, nil
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Holds reports whether (a) is at or below both (b) and (c) in KL at every
// point, and the points where it is not.
func (p *Proof) Holds() (bool, []float64) {
	var bad []float64
	for _, pt := range p.Points {
		if pt.Calibrated.KL > pt.Uniform.KL+1e-12 || pt.Calibrated.KL > pt.Random.KL+1e-12 {
			bad = append(bad, pt.Budget)
		}
	}
	return len(bad) == 0, bad
}
