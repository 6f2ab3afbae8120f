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
//     whatever the formula says: the formula assumes the costs add up and
//     the target's step cost is the same at every position, and a round
//     that loses in practice must not be kept. The other K's expected
//     rates are discounted by the vetoed K's observed ÷ expected rate.
//   - Probe rounds (specMeter.probeK) run at another K: first each K whose
//     verify batch size was never measured and that could beat the choice
//     even if that batch cost no more than the largest measured smaller
//     one, then the vetoed K, then one above or below the choice, so the
//     measurements stay fresh.

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
	autoMinRounds = 5
	// autoStartK is the K of the rounds that take the first acceptance and
	// draft-cost readings. It was 4: on a CPU where a batch of n costs n
	// steps (the SYNTHETIC l1b repacked, v(5) = 4.06), each such round
	// cost about 2.8 steps more than the tokens it gave (α 0.8), and auto
	// K ran at 0.85× plain over 48 tokens, 0.92× over 200. The SIMULATED
	// cases of specauto_test.go compared 1, 2 and 4: 2 was best or within
	// 0.01 in every case.
	autoStartK = 2
	// autoMaxBackoff bounds how far probes are spaced while K stays 0:
	// every autoProbeEvery << autoMaxBackoff rounds (256). It was 2 (64).
	autoMaxBackoff = 4
)

// observed is the smoothed outcome of the rounds that drafted n tokens.
type observed struct {
	emitted, time smooth // tokens per round, seconds per round
	rounds        int
}

// rate is tokens per second (0 before any round).
func (o *observed) rate() float64 {
	if o.rounds == 0 || o.time.x <= 0 {
		return 0
	}
	return o.emitted.x / o.time.x
}

// roundDone records a whole round (draft + verify + acceptance) that
// drafted nd tokens and emitted emitted tokens in d.
func (m *specMeter) roundDone(nd, emitted int, d time.Duration) {
	o := &m.obs[nd]
	if o.rounds == 1 { // the second round replaces the first (warm-up)
		o.emitted, o.time = smooth{}, smooth{}
	}
	o.emitted.add(float64(emitted))
	o.time.add(d.Seconds())
	o.rounds++
}

// vetoed reports whether the rounds at K = k delivered fewer tokens per
// second than the plain steps.
func (m *specMeter) vetoed(k int) bool {
	ok, o0 := &m.obs[k], &m.obs[0]
	return ok.rounds >= autoMinRounds && o0.rounds >= 2 && ok.rate() < o0.rate()
}

// realized is the smallest ratio of observed to expected rate over the
// vetoed K (1 when none is): when the rounds at one K deliver less than
// the formula says, the formula's other K are discounted by as much, so a
// veto does not just move on to the next K the same error favours.
func (m *specMeter) realized(ss *SpecSensors) float64 {
	f := 1.0
	for k := 1; k <= MaxSpecK; k++ {
		if m.vetoed(k) {
			if e := ss.ExpectedRate(k); e > 0 {
				f = min(f, m.obs[k].rate()/m.obs[0].rate()/e)
			}
		}
	}
	return f
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
		return autoStartK, autoStartK
	}
	best := ss.BestK(MaxSpecK, autoMargin)
	k := ss.bestKExcept(MaxSpecK, autoMargin, m.vetoed, m.realized(&ss))
	if k > 0 {
		m.backoff = 0
	}
	switch {
	case m.probeRound(step, k > 0 || m.unmeasured(k, &ss) > 0):
		if k == 0 { // probes keep losing: space them out
			m.backoff = min(m.backoff+1, autoMaxBackoff)
		}
		return k, m.probeK(step, k, best, &ss)
	case k > 0 && step%autoPlainEvery == autoPlainEvery/2:
		return k, 0 // refresh v(1) and the plain rate
	}
	return k, k
}

// probeRound reports whether round step is a probe: every
// autoProbeEvery/2 rounds for the first 4·autoProbeEvery rounds while
// there is something to learn (K > 0, or an unmeasured K that could beat
// plain), every autoProbeEvery after, up to 2^autoMaxBackoff times less
// often while K stays 0. Before the learning condition, a K = 0 run of
// 128 tokens on the SYNTHETIC l1b (P = 0.7, nothing pays) probed every 8
// rounds for its first 64 and ran at 0.88× plain.
func (m *specMeter) probeRound(step int, learning bool) bool {
	if step <= 4*autoProbeEvery && learning {
		return step%(autoProbeEvery/2) == 0
	}
	return step%(autoProbeEvery<<m.backoff) == 0
}

// probeK is the K of a probe round, k the choice and best the formula's
// choice before vetoes: the K nearest k whose verify batch was never
// measured and that could beat the choice (v(n) of a batch size not yet
// run is extrapolated, and the cost of a batch need not be smooth in n: it
// jumps where the matrix kernels start another block of columns), else the
// vetoed best (the conditions may have changed), else one above or below k
// in turn.
func (m *specMeter) probeK(step, k, best int, ss *SpecSensors) int {
	if c := m.unmeasured(k, ss); c > 0 {
		return c
	}
	switch {
	case best != k:
		return best
	case (step/autoProbeEvery)%2 == 1 && k > 1:
		return k - 1
	}
	return min(k+1, MaxSpecK)
}

// unmeasured is the K nearest k whose verify batch was measured at most
// once (the first batch of a size also pays for its warm-up) and that could
// beat the choice k if it cost no more than the largest smaller batch
// measured twice (optimisticRate), 0 when there is none.
func (m *specMeter) unmeasured(k int, ss *SpecSensors) int {
	bar := max(1+autoMargin, ss.ExpectedRate(k))
	o := *ss
	for c := 1; c <= MaxSpecK; c++ {
		if m.nVer[c] < 2 {
			o.VerifyCost[c] = 0
		}
	}
	for d := 1; d < MaxSpecK; d++ {
		for _, c := range []int{k - d, k + d} {
			if c >= 1 && c <= MaxSpecK && m.nVer[c] < 2 && o.optimisticRate(c) > bar {
				return c
			}
		}
	}
	return 0
}

// optimisticRate is ExpectedRate(k) with an unmeasured v(k+1) taken as
// the v(m) of the largest measured m ≤ k+1 (a batch costs at least about
// as much as a smaller one): an upper bound on what k could deliver.
func (ss *SpecSensors) optimisticRate(k int) float64 {
	o := *ss
	if o.VerifyCost[k] <= 0 {
		for m := k - 1; m >= 0; m-- {
			if v := o.VerifyCost[m]; v > 0 {
				o.VerifyCost[k] = v
				break
			}
		}
	}
	return o.ExpectedRate(k)
}
