package calib

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/precision"
)

// MaxExhaustive is the largest assignment space the proof evaluates whole
// (stories260K-ff192: 4 sets ^ 5 layers = 1,024); beyond it the equal-bits
// baseline is RandomDraws random assignments at exactly the same bits.
const MaxExhaustive = 4096

// RandomDraws is how many random equal-bits assignments each proof point
// compares with when the space is too large to evaluate whole.
const RandomDraws = 64

// DefaultBudgets are the average bits per weight the proof is evaluated at.
var DefaultBudgets = []float64{4.5, 4.75, 5, 5.5, 6, 6.5, 7, 8, 8.5, 10, 14}

// Eval is one assignment evaluated on the held-out text.
type Eval struct {
	Sets    []int   `json:"sets"`     // weight set per layer
	AvgBits float64 `json:"avg_bits"` // mean bits per weight of the layers
	KL      float64 `json:"kl"`       // mean KL against the base (all layers on set 0)
	PPL     float64 `json:"ppl"`

	reps []float64 // mean KL in each bootstrap replicate
}

// Point compares, at one budget, the calibrated assignment (a) with the
// assignments at exactly its average bits: the uniform one when there is
// one, and the whole equal-bits distribution (every such assignment when
// the space is evaluated whole, else RandomDraws random ones). "Below" is
// strict, with the 95 % bootstrap interval of the difference.
type Point struct {
	Budget     float64 `json:"budget"`
	Calibrated Eval    `json:"calibrated"`
	// Additive is the assignment Calibrated picks from the manifest's
	// per-layer KLs alone (their sum, by dynamic programming), when (a)
	// comes from a measured allocator (ProofOptions.Allocator).
	Additive *Eval `json:"additive,omitempty"`
	// EqualN is how many assignments have exactly (a)'s bits (all of them,
	// (a) included, when Proof.Exhaustive; else the random draws plus (a)).
	EqualN int `json:"equal_n"`
	// Rank is (a)'s place among them by KL: 1 + how many are strictly below.
	Rank      int       `json:"rank"`
	EqualKLs  []float64 `json:"equal_kls"` // sorted
	EqualBest Eval      `json:"equal_best"`
	// EqualMedian is the median KL of the equal-bits assignments other
	// than (a); VsMedian is (a) minus it (nil when there are none).
	EqualMedian *float64  `json:"equal_median,omitempty"`
	VsMedian    *Interval `json:"vs_median,omitempty"`
	// Uniform is the uniform assignment at exactly (a)'s bits, if any;
	// VsUniform is (a) minus it (nil when (a) is that assignment or there
	// is none).
	Uniform   *Eval     `json:"uniform,omitempty"`
	VsUniform *Interval `json:"vs_uniform,omitempty"`
	// UniformInterp is the KL linearly interpolated in bits between the
	// two uniform assignments around (a)'s bits: a reference line, not an
	// assignment (NaN outside the uniform range; JSON null).
	UniformInterp *float64 `json:"uniform_interp,omitempty"`
}

// Level answers, at the bits of one uniform assignment, whether any
// assignment at exactly those bits beats it: the bound on every allocator.
type Level struct {
	Set     string  `json:"set"`
	AvgBits float64 `json:"avg_bits"`
	Uniform Eval    `json:"uniform"`
	N       int     `json:"n"`    // assignments at exactly these bits (uniform included)
	Rank    int     `json:"rank"` // uniform's: 1 + how many are strictly below it
	Best    Eval    `json:"best"`
	// BestVsUniform is the best one minus uniform (nil when uniform is
	// the best or alone).
	BestVsUniform *Interval `json:"best_vs_uniform,omitempty"`
}

// Proof is the calibrated-versus-equal-bits comparison on held-out text.
type Proof struct {
	BasePPL float64 `json:"base_ppl"`
	Scored  int     `json:"scored"`
	Blocks  int     `json:"blocks"` // bootstrap units (BlockLen positions)
	// Exhaustive: the space (Assignments of them) was enumerated whole,
	// so every equal-bits group is complete; Evaluated is how many were
	// run on the held-out text (the groups the comparison needs).
	Exhaustive  bool `json:"exhaustive"`
	Assignments int  `json:"assignments"`
	Evaluated   int  `json:"evaluated"`
	Chunk       int  `json:"chunk"` // tokens per teacher-forced chunk
	// Allocator says how (a) was chosen (ProofOptions.Allocator).
	Allocator string      `json:"allocator"`
	Path      []PathPoint `json:"path,omitempty"` // measured on the calibration text
	// Floor is the two-way allocator's bottom-up table (FloorTable).
	Floor  *precision.Manifest `json:"floor_table,omitempty"`
	Points []Point             `json:"points"`
	Levels []Level             `json:"uniform_levels,omitempty"`
}

// ProofOptions configures RunProof.
type ProofOptions struct {
	Budgets []float64 // nil: DefaultBudgets
	Threads int
	Chunk   int    // tokens per teacher-forced chunk (0 = 512), on both texts
	Seed    uint64 // of the random draws and the bootstrap
	// Allocator chooses (a): AllocAdditive (the default), AllocPath or
	// AllocSwap; the last two measure on CalTokens, the calibration text,
	// and report the additive choice beside theirs.
	Allocator string
	CalTokens []int32
	// PathProgress is called after each step of the path (may be nil).
	PathProgress func(PathPoint)
	// EvalProgress is called after each distinct held-out evaluation.
	EvalProgress func(done int, e *Eval)
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
	// AllocTwoWay is TwoWay: the top-down (manifest) and bottom-up
	// (FloorTable) least sums, the one measured lower on the calibration
	// text.
	AllocTwoWay = "twoway"
)

// RunProof evaluates, on tokens (text the manifest was not calibrated on),
// the calibrated assignment at each budget against the assignments at
// exactly its bits (every assignment of the space when it has at most
// MaxExhaustive, which also gives Levels), with the engine's sets in the
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
		path, err := measuredPath(eng, m, o.CalTokens, o.Chunk, threads, o.PathProgress)
		if err != nil {
			return nil, err
		}
		p.Allocator, p.Path = AllocPath, path
	case AllocSwap, AllocTwoWay:
		cr, cref, err := calRunner(eng, o.CalTokens, o.Chunk, threads)
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
		if o.Allocator == AllocTwoWay {
			ft, err := FloorTable(m, measure)
			if err != nil {
				return nil, err
			}
			swap = func(b float64) ([]int, error) { return TwoWay(m, ft, b, measure) }
			p.Allocator, p.Floor = AllocTwoWay, ft
		}
	default:
		return nil, fmt.Errorf("proof: unknown allocator %q (want %s, %s, %s or %s)", o.Allocator, AllocAdditive, AllocPath, AllocSwap, AllocTwoWay)
	}
	r, err := NewRunner(eng, tokens, o.Chunk, threads)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	p.Chunk = r.Chunk
	if err := r.Sess.SetLayerSets(Uniform(n, 0)); err != nil {
		return nil, err
	}
	ref, err := r.NewReference()
	if err != nil {
		return nil, err
	}
	p.BasePPL, p.Scored = ref.PPL(), r.Scored()
	p.Blocks = NBlocks(p.Scored)
	bs := newBootstrap(BlockSizes(p.Scored), BootstrapReps, seed)
	cache := map[string]*Eval{}
	defer func() { p.Evaluated = len(cache) }()
	eval := func(a []int) (*Eval, error) {
		key := fmt.Sprint(a)
		if e, ok := cache[key]; ok {
			return e, nil
		}
		if err := r.Sess.SetLayerSets(a); err != nil {
			return nil, err
		}
		sc, err := r.Score(ref)
		if err != nil {
			return nil, err
		}
		e := &Eval{Sets: slices.Clone(a), AvgBits: AvgBits(a, m.Sets), KL: sc.KL, PPL: sc.PPL, reps: bs.means(sc.Blocks)}
		cache[key] = e
		if o.EvalProgress != nil {
			o.EvalProgress(len(cache), e)
		}
		return e, nil
	}
	// byCost: the equal-bits assignments, all of them when the space is
	// small enough.
	byCost := map[int][][]int{}
	if total := NAssignments(n, len(m.Sets)); total > 0 {
		p.Exhaustive, p.Assignments = true, total
		for _, a := range All(n, len(m.Sets)) { // enumerated, evaluated when a group is needed
			c := Cost(a, m.Sets)
			byCost[c] = append(byCost[c], a)
		}
	}
	equal := func(c int, self []int, bi int) [][]int {
		if p.Exhaustive {
			return byCost[c]
		}
		out := RandomAt(m.Sets, n, c, RandomDraws, seed+uint64(bi))
		if !slices.ContainsFunc(out, func(x []int) bool { return slices.Equal(x, self) }) {
			out = append(out, self)
		}
		return out
	}
	var uniforms []*Eval // by bits, ascending
	for si := range m.Sets {
		e, err := eval(Uniform(n, si))
		if err != nil {
			return nil, err
		}
		uniforms = append(uniforms, e)
	}
	slices.SortFunc(uniforms, func(x, y *Eval) int { return cmpFloat(x.AvgBits, y.AvgBits) })
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
			pt.Additive = ad
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
		ce, err := eval(ca)
		if err != nil {
			return nil, err
		}
		pt.Calibrated = *ce
		c := Cost(ca, m.Sets)
		var others [][]float64
		var otherKLs []float64
		best := ce
		for _, a := range equal(c, ca, bi) {
			e, err := eval(a)
			if err != nil {
				return nil, err
			}
			pt.EqualN++
			pt.EqualKLs = append(pt.EqualKLs, e.KL)
			if e.KL < ce.KL {
				pt.Rank++
			}
			if e.KL < best.KL {
				best = e
			}
			if !slices.Equal(a, ca) {
				others = append(others, e.reps)
				otherKLs = append(otherKLs, e.KL)
			}
		}
		pt.Rank++
		sort.Float64s(pt.EqualKLs)
		pt.EqualBest = *best
		if len(others) > 0 {
			med := median(otherKLs)
			pt.EqualMedian = &med
			pt.VsMedian = interval(ce.KL-med, ce.reps, medianRep(others))
		}
		if si := UniformAt(m.Sets, n, c); si >= 0 {
			u, err := eval(Uniform(n, si))
			if err != nil {
				return nil, err
			}
			pt.Uniform = u
			if !slices.Equal(u.Sets, ca) {
				pt.VsUniform = interval(ce.KL-u.KL, ce.reps, u.reps)
			}
		}
		if v := interpolate(uniforms, ce.AvgBits); !math.IsNaN(v) {
			pt.UniformInterp = &v
		}
		p.Points = append(p.Points, pt)
	}
	if p.Exhaustive {
		for _, u := range uniforms {
			lv := Level{Set: m.Sets[u.Sets[0]].File, AvgBits: u.AvgBits, Uniform: *u}
			best := u
			for _, a := range byCost[Cost(u.Sets, m.Sets)] {
				e, err := eval(a)
				if err != nil {
					return nil, err
				}
				lv.N++
				if e.KL < u.KL {
					lv.Rank++
				}
				if e.KL < best.KL {
					best = e
				}
			}
			lv.Rank++
			lv.Best = *best
			if best != u {
				lv.BestVsUniform = interval(best.KL-u.KL, best.reps, u.reps)
			}
			p.Levels = append(p.Levels, lv)
		}
	}
	return p, nil
}

// interpolate is the KL at bits x on the line through the uniform
// assignments (sorted by bits) around it; NaN outside their range.
func interpolate(us []*Eval, x float64) float64 {
	for i := 0; i+1 < len(us); i++ {
		lo, hi := us[i], us[i+1]
		if x >= lo.AvgBits-1e-9 && x <= hi.AvgBits+1e-9 {
			if hi.AvgBits == lo.AvgBits {
				return lo.KL
			}
			t := (x - lo.AvgBits) / (hi.AvgBits - lo.AvgBits)
			return lo.KL + t*(hi.KL-lo.KL)
		}
	}
	return math.NaN()
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// calRunner is a runner on the calibration tokens with its base reference.
func calRunner(eng *native.Engine, tokens []int32, chunk, threads int) (*Runner, *Reference, error) {
	if tokens == nil {
		return nil, nil, fmt.Errorf("proof: the measured allocators need the calibration text")
	}
	r, err := NewRunner(eng, tokens, chunk, threads)
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
func measuredPath(eng *native.Engine, m *precision.Manifest, tokens []int32, chunk, threads int, progress func(PathPoint)) ([]PathPoint, error) {
	r, ref, err := calRunner(eng, tokens, chunk, threads)
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

// Holds reports whether (a) is strictly below, beyond the bootstrap
// interval, both the uniform assignment at exactly its bits (where there
// is one other than (a)) and the median of the other assignments at
// exactly its bits (where there are any), at every budget; bad lists the
// budgets where it is not. Budgets where (a) is the only assignment at its
// bits are not a comparison and do not count either way.
func (p *Proof) Holds() (bool, []float64) {
	var bad []float64
	for _, pt := range p.Points {
		if pt.Uniform != nil && pt.VsUniform == nil && pt.EqualN > 1 {
			bad = append(bad, pt.Budget) // (a) is uniform: not below it
			continue
		}
		if (pt.VsUniform != nil && !pt.VsUniform.Below()) || (pt.VsMedian != nil && !pt.VsMedian.Below()) {
			bad = append(bad, pt.Budget)
		}
	}
	return len(bad) == 0, bad
}
