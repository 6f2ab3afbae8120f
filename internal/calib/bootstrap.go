package calib

import (
	"math"
	"math/rand/v2"
	"sort"
)

// BootstrapReps is how many bootstrap replicates the proof's intervals use.
const BootstrapReps = 2000

// Interval is a difference of mean KLs, (a) minus a baseline, with its 95 %
// bootstrap percentile interval over text blocks (BlockLen scored
// positions each, resampled with replacement, the same resample for every
// assignment: the comparison is paired).
type Interval struct {
	Diff float64 `json:"diff"`
	Lo   float64 `json:"lo"`
	Hi   float64 `json:"hi"`
}

// Below reports whether the whole interval is below zero: (a) is strictly
// below the baseline beyond the text's sampling noise.
func (iv *Interval) Below() bool { return iv != nil && iv.Hi < 0 }

// bootstrap holds the block multiplicities of each replicate.
type bootstrap struct {
	sizes  []float64   // scored positions per block
	counts [][]float64 // counts[r][b]: how often block b is drawn in replicate r
}

func newBootstrap(sizes []float64, reps int, seed uint64) *bootstrap {
	rng := rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))
	bs := &bootstrap{sizes: sizes, counts: make([][]float64, reps)}
	for r := range reps {
		c := make([]float64, len(sizes))
		for range sizes {
			c[rng.IntN(len(sizes))]++
		}
		bs.counts[r] = c
	}
	return bs
}

// means is an evaluation's mean KL in each replicate.
func (bs *bootstrap) means(blocks []float64) []float64 {
	out := make([]float64, len(bs.counts))
	for r, c := range bs.counts {
		var s, n float64
		for b, k := range c {
			s += k * blocks[b]
			n += k * bs.sizes[b]
		}
		out[r] = s / n
	}
	return out
}

// interval is (a − base) with the percentile interval of the replicates'
// differences.
func interval(diff float64, a, base []float64) *Interval {
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - base[i]
	}
	sort.Float64s(d)
	return &Interval{Diff: diff, Lo: percentile(d, 0.025), Hi: percentile(d, 0.975)}
}

// medianRep is, per replicate, the median over several evaluations' means.
func medianRep(reps [][]float64) []float64 {
	if len(reps) == 0 {
		return nil
	}
	out := make([]float64, len(reps[0]))
	col := make([]float64, len(reps))
	for r := range out {
		for i := range reps {
			col[i] = reps[i][r]
		}
		out[r] = median(col)
	}
	return out
}

// percentile of sorted values, linear between ranks.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	x := q * float64(len(sorted)-1)
	i := int(x)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (x-float64(i))*(sorted[i+1]-sorted[i])
}
