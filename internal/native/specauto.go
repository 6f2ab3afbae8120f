package native

import "time"

// Auto K (Speculator.SetAuto): before each round the Speculator picks the
// K with the highest expected rate E(K) / (K·c + v(K+1)) from its own
// measurements (SpecSensors.BestK), and checks the choice against what
// the rounds actually delivered:
//
//   - v(1), the unit of every cost, is re-measured by a plain step every
//     autoPlainEvery rounds while K > 0. Without it the unit is the one
//     plain step taken before the first draft: a stale or unlucky unit
//     (a first step that paid for warm-up, a target whose step cost moves)
//     makes every v(n) and c wrong for the rest of the run, and K never
//     returns to 0 to correct them.
//   - Observed rates: the tokens emitted per unit of time of the last
//     rounds at each K (draft, verify and bookkeeping included) against
//     the plain steps'. A K whose observed rate is below plain is vetoed
//     (K = 0) whatever the formula says: the formula assumes the costs add
//     up and the target's step cost is the same at every position, and a
//     round that loses in practice must not be kept.
//   - Probe rounds (specMeter.probeK) run at another K: first each K whose
//     verify batch size was never measured, then the vetoed K, then one
//     above or below the choice, so the measurements stay fresh.

const (
	// autoProbeEvery is the period of the probe rounds.
	autoProbeEvery = 16
	// autoPlainEvery is the period of the plain steps that refresh v(1)
	// while K > 0 (offset by half a period from the probes).
	autoPlainEvery = 32
	// autoMargin is how much a K's expected rate must beat plain by.
	autoMargin = 0.02
	// autoMinRounds is how many rounds at a K its observed rate needs
	// before it can veto that K.
	autoMinRounds = 3
)

// observed is the smoothed outcome of the rounds that drafted n tokens.
type observed struct {
	emitted, time float64 // EMAs: tokens per round, seconds per round
	rounds        int
}

// rate is tokens per second (0 before any round).
func (o *observed) rate() float64 {
	if o.rounds == 0 || o.time <= 0 {
		return 0
	}
	return o.emitted / o.time
}

// roundDone records a whole round (draft + verify + acceptance) that
// drafted nd tokens and emitted emitted tokens in d.
func (m *specMeter) roundDone(nd, emitted int, d time.Duration) {
	o := &m.obs[nd]
	have := o.rounds > 1 // the second round replaces the first (warm-up)
	ema(&o.emitted, &have, float64(emitted))
	have = o.rounds > 1
	ema(&o.time, &have, d.Seconds())
	o.rounds++
}

// vetoed reports whether the rounds at K = k delivered fewer tokens per
// second than the plain steps.
func (m *specMeter) vetoed(k int) bool {
	ok, o0 := &m.obs[k], &m.obs[0]
	return ok.rounds >= autoMinRounds && o0.rounds >= 2 && ok.rate() < o0.rate()
}

// nextK is the choice of K and the K of round step (1-based; they differ
// in probe rounds and plain refresh steps) in auto mode, from the
// measurements so far: the best K by the formula among those not vetoed.
func (m *specMeter) nextK(step int) (choice, round int) {
	ss := m.sensors()
	switch {
	case m.nVer[0] < 2:
		return 0, 0 // measure plain steps first (the first one warms up)
	case !ss.HaveAccept || !ss.HaveCost:
		return 4, 4
	}
	best := ss.BestK(MaxSpecK, autoMargin)
	k := ss.bestKExcept(MaxSpecK, autoMargin, m.vetoed)
	switch {
	case m.probeRound(step):
		return k, m.probeK(step, k, best)
	case k > 0 && step%autoPlainEvery == autoPlainEvery/2:
		return k, 0 // refresh v(1) and the plain rate
	}
	return k, k
}

// probeRound reports whether round step is a probe: every
// autoProbeEvery/2 rounds for the first 4·autoProbeEvery rounds (while
// most v(n) are unmeasured), every autoProbeEvery after.
func (m *specMeter) probeRound(step int) bool {
	if step <= 4*autoProbeEvery {
		return step%(autoProbeEvery/2) == 0
	}
	return step%autoProbeEvery == 0
}

// probeK is the K of a probe round, k the choice and best the formula's
// choice before vetoes: the K nearest k whose verify batch was never
// measured (v(n) of a batch size not yet run is extrapolated, and the
// cost of a batch need not be smooth in n: it jumps where the matrix
// kernels start another block of columns), else the vetoed best (the
// conditions may have changed), else one above or below k in turn.
func (m *specMeter) probeK(step, k, best int) int {
	for d := 1; d < MaxSpecK; d++ {
		for _, c := range []int{k - d, k + d} {
			if c >= 1 && c <= MaxSpecK && m.nVer[c] == 0 {
				return c
			}
		}
	}
	switch {
	case best != k:
		return best
	case (step/autoProbeEvery)%2 == 1 && k > 1:
		return k - 1
	}
	return min(k+1, MaxSpecK)
}
