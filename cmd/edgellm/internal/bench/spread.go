package bench

import (
	"fmt"
	"slices"
)

// SpreadLimit is the (max − min) / median of a rate's repeats above which a
// benchmark warns that its repeats disagree: 20%.
const SpreadLimit = 0.20

// Spread is the range of a rate over a benchmark's repeats.
type Spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// spreadOf is the min, median and max of xs (zero for none).
func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	return Spread{Min: slices.Min(xs), Median: Median(xs), Max: slices.Max(xs)}
}

// Rel is (Max − Min) / Median: 0 when the repeats agree, 0.25 when they span
// a quarter of the median. 0 for a zero median.
func (s Spread) Rel() float64 { return ratio(s.Max-s.Min, s.Median) }

// String is "min / median / max".
func (s Spread) String() string {
	return fmt.Sprintf("%.1f / %.1f / %.1f", s.Min, s.Median, s.Max)
}

// Warnings lists the rates of r whose repeats disagree by more than
// SpreadLimit, one line each, for a report: such a median describes the
// machine's other jobs as much as the engine.
func (r *Result) Warnings() []string {
	var w []string
	for _, x := range []struct {
		name string
		s    Spread
	}{{"prefill tok/s", r.PrefillSpread}, {"decode tok/s", r.DecodeSpread}} {
		if r.Repeats > 1 && x.s.Rel() > SpreadLimit {
			w = append(w, fmt.Sprintf("warning: %s %s repeats disagree by %.0f%% (min %.1f, median %.1f, max %.1f; limit %.0f%%): the machine was likely busy, treat the median with care",
				r.Engine, x.name, 100*x.s.Rel(), x.s.Min, x.s.Median, x.s.Max, 100*SpreadLimit))
		}
	}
	return w
}
