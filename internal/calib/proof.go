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
	// Additive is the assignment Calibrated picks from the manifest's
	// per-layer KLs alone (their sum, by dynamic programming), when (a)
	// comes from a measured allocator (ProofOptions.Allocator).
	Additive *Eval `json:"additive,omitempty"`
	Uniform  Eval  `json:"uniform"`
	// Random is the draw with the median KL; RandomKLs all of them.
	Random     Eval      `json:"random_median"`
	RandomKLs  []float64 `json:"random_kls"`
	RandomPPLs []float64 `json:"random_ppls"`
}

// Proof is the calibrated-versus-uniform-versus-random comparison.
type Proof struct {
	BasePPL float64 `json:"base_ppl"`
	Scored  int     `json:"scored"`
	// Allocator says how (a) was chosen (ProofOptions.Allocator).
	Allocator string      `json:"allocator"`
	Path      []PathPoint `json:"path,omitempty"` // measured on the calibration text
	Points    []Point     `json:"points"`
}

// ProofOptions configures RunProof.
type ProofOptions struct {
	Budgets []float64 // nil: DefaultBudgets
	Threads int
	Seed    uint64 // of the random draws
	// Allocator chooses (a): AllocAdditive (the default), AllocPath or
	// AllocSwap; the last two measure on CalTokens, the calibration text,
	// and report the additive choice beside theirs.
	Allocator string
	CalTokens []int32
	// PathProgress is called after each step of the path (may be nil).
	PathProgress func(PathPoint)
}

// The allocators of the proof's (a).
const (
	// AllocAdditive is Calibrated: the least sum of the manifest's
	// per-layer KLs within the budget (exact).
	AllocAdditive = "additive"
	// AllocPath is OnPath over MeasurePath on the calibration text.
	AllocPath = "path"
	// AllocSwap is Refine, measuring on the calibration text.
	AllocSwap = "swap"
)

// RunProof evaluates, on tokens (text the manifest was not calibrated on),
// the three assignments at each budget, with the engine's sets in the
// manifest's order. The head stays on the base set throughout.
func RunProof(eng *native.Engine, m *precision.Manifest, tokens []int32, o ProofOptions) (*Proof, error) {
	n := eng.Config().NLayer
	budgets, threads, seed := o.Budgets, o.Threads, o.Seed
	if budgets == nil {
		budgets = DefaultBudgets
	}
	p := &Proof{Allocator: AllocAdditive}
	var swap func(budget float64) ([]int, error)
	switch o.Allocator {
	case "", AllocAdditive:
	case AllocPath:
		path, err := measuredPath(eng, m, o.CalTokens, threads, o.PathProgress)
		if err != nil {
			return nil, err
		}
		p.Allocator, p.Path = AllocPath, path
	case AllocSwap:
		cr, cref, err := calRunner(eng, o.CalTokens, threads)
		if err != nil {
			return nil, err
		}
		defer cr.Close()
		measured := map[string]float64{}
		measure := func(a []int) (float64, error) {
			key := fmt.Sprint(a)
			if kl, ok := measured[key]; ok {
				return kl, nil
			}
			if err := cr.Sess.SetLayerSets(a); err != nil {
				return 0, err
			}
			sc, err := cr.Score(cref)
			if err != nil {
				return 0, err
			}
			measured[key] = sc.KL
			return sc.KL, nil
		}
		swap = func(b float64) ([]int, error) { return Refine(m, b, measure) }
		p.Allocator = AllocSwap
	default:
		return nil, fmt.Errorf("proof: unknown allocator %q (want %s, %s or %s)", o.Allocator, AllocAdditive, AllocPath, AllocSwap)
	}
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
	p.BasePPL, p.Scored = ref.PPL(), r.Scored()
	for bi, b := range budgets {
		ca, ok := Calibrated(m, b)
		if !ok {
			continue
		}
		pt := Point{Budget: b}
		if p.Allocator != AllocAdditive {
			ad, err := eval(ca)
			if err != nil {
				return nil, err
			}
			pt.Additive = &ad
			switch {
			case p.Path != nil:
				if ca, ok = OnPath(p.Path, b); !ok {
					continue
				}
			case swap != nil:
				if ca, err = swap(b); err != nil {
					return nil, err
				}
			}
		}
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

// calRunner is a runner on the calibration tokens with its base reference.
func calRunner(eng *native.Engine, tokens []int32, threads int) (*Runner, *Reference, error) {
	if tokens == nil {
		return nil, nil, fmt.Errorf("proof: the measured allocators need the calibration text")
	}
	r, err := NewRunner(eng, tokens, 0, threads)
	if err != nil {
		return nil, nil, err
	}
	if err := r.Sess.SetLayerSets(Uniform(eng.Config().NLayer, 0)); err != nil {
		r.Close()
		return nil, nil, err
	}
	ref, err := r.NewReference()
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	return r, ref, nil
}

// measuredPath runs MeasurePath on the calibration tokens.
func measuredPath(eng *native.Engine, m *precision.Manifest, tokens []int32, threads int, progress func(PathPoint)) ([]PathPoint, error) {
	r, ref, err := calRunner(eng, tokens, threads)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return MeasurePath(r, ref, m.Sets, eng.Config().NLayer, progress)
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
