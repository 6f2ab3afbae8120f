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
//   - Exploring probes (exploreBudget) run each K whose verify batch size
//     was not measured twice and that could beat the choice even if that
//     batch cost no more than a plain step, v(1): a batch of n costs at
//     least that, but need not cost at least as much as a smaller batch
//     (ggml's repacked Q4_0 gemm takes 4 rows at a time: v(2), v(3), v(4)
//     ≈ 2.1, 2.8, 1.2). A size is measured twice (the first batch also
//     paid for warm-up), and the probes run only while what
//     they lost stays within autoExploreShare of the run's time (taken as
//     at least autoExploreHorizon plain steps): at most two rounds per K,
//     2·MaxSpecK = 16 in all, and on a smooth v(n) where nothing pays they
//     cost at most 2.5% of the run plus one probe (SIMULATED, 200 rounds:
//     0.955–0.988× plain, 0.960 with 3 steps of warm-up per batch size).
//   - Probe rounds (specMeter.probeK) run at another K on a schedule: the
//     vetoed K, then one above or below the choice, so the measurements
//     stay fresh.

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
	// autoExploreShare bounds what the probes of unmeasured batch sizes
	// may lose, as a share of the run's time. At 0.05 the SIMULATED
	// "stale unit" case (3 steps of warm-up per batch size, nothing pays)
	// ran at 0.936× plain over 200 rounds; at 0.025 0.960, as before the
	// exploring probes.
	autoExploreShare = 0.025
	// autoExploreHorizon is the run length, in plain steps, the share is
	// taken of until the run is longer: without it the first probes of a
	// run waited for its time to grow, and on the SIMULATED repacked v(n)
	// at α 0.9 K = 3 was first tried at round 31 instead of 7 (share 0.05; a 64-token
	// reply is about 30 rounds).
	autoExploreHorizon = 128
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
	m.explore.done(m, d, emitted)
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
	if c := m.explore.next(m, k, &ss); c > 0 {
		return k, c
	}
	switch {
	case m.probeRound(step, k > 0):
		if k == 0 { // probes keep losing: space them out
			m.backoff = min(m.backoff+1, autoMaxBackoff)
		}
		return k, m.probeK(step, k, best, &ss)
	case k > 0 && step%autoPlainEvery == autoPlainEvery/2:
		return k, 0 // refresh v(1) and the plain rate
	}
	return k, k
}

// probeRound reports whether round step is a scheduled probe: every
// autoProbeEvery/2 rounds for the first 4·autoProbeEvery rounds while
// there is something to learn (K > 0; unmeasured K are the exploring
// probes' job), every autoProbeEvery after, up to 2^autoMaxBackoff times less
// often while K stays 0. Before the learning condition, a K = 0 run of
// 128 tokens on the SYNTHETIC l1b (P = 0.7, nothing pays) probed every 8
// rounds for its first 64 and ran at 0.88× plain.
func (m *specMeter) probeRound(step int, learning bool) bool {
	if step <= 4*autoProbeEvery && learning {
		return step%(autoProbeEvery/2) == 0
	}
	return step%(autoProbeEvery<<m.backoff) == 0
}

// probeK is the K of a scheduled probe round, k the choice and best the
// formula's choice before vetoes: the vetoed best (the conditions may have
// changed), else one above or below k in turn. (It also took the K nearest
// k whose batch was never measured: exploreBudget does that now, paced by
// what it costs instead of by the schedule.)
func (m *specMeter) probeK(step, k, best int, ss *SpecSensors) int {
	switch {
	case best != k:
		return best
	case (step/autoProbeEvery)%2 == 1 && k > 1:
		return k - 1
	}
	return min(k+1, MaxSpecK)
}

// exploreBudget paces the exploring probes, of batch sizes not yet measured
// twice: one runs whenever what they lost so far (their time minus the
// plain steps their tokens would have taken), plus what it would lose by
// the formula, is within autoExploreShare of all the rounds' time (at
// least autoExploreHorizon plain steps).
type exploreBudget struct {
	loss, total float64 // seconds: lost by these probes, all rounds
	probing     bool    // the current round is one
}

// next is the K of an exploring probe round (0 = none now) for choice k.
func (e *exploreBudget) next(m *specMeter, k int, ss *SpecSensors) int {
	c := m.unmeasured(k, ss)
	o := &m.obs[0]
	if c == 0 || o.emitted.x <= 0 {
		return 0
	}
	// what the probe would lose, in plain steps, if its batch cost what
	// the formula extrapolates (the loss is booked as measured after)
	cost := float64(c)*float64(ss.DraftCost) + ss.verifyCost(c+1)
	lose := cost * (1 - ss.ExpectedRate(c))
	step := o.time.x / o.emitted.x // seconds per token of a plain step
	if e.loss+max(0, lose)*step > autoExploreShare*max(e.total, autoExploreHorizon*step) {
		return 0
	}
	e.probing = true
	return c
}

// done records a round of d that emitted tokens.
func (e *exploreBudget) done(m *specMeter, d time.Duration, emitted int) {
	e.total += d.Seconds()
	if e.probing {
		e.probing = false
		if o := &m.obs[0]; o.emitted.x > 0 {
			e.loss += d.Seconds() - float64(emitted)*o.time.x/o.emitted.x
		}
	}
}

// unmeasured is the K nearest k (the smaller first) whose verify batch was
// measured at most once (the first batch of a size also pays for its
// warm-up) and that could beat the choice k if that batch cost no more than
// a plain step (optimisticRate), 0 when there is none. The same K stays the
// nearest until its batch was measured twice, so its two probes run back
// to back when the budget allows.
func (m *specMeter) unmeasured(k int, ss *SpecSensors) int {
	bar := max(1+autoMargin, ss.ExpectedRate(k))
	for d := 1; d < MaxSpecK; d++ {
		for _, c := range []int{k - d, k + d} {
			if c >= 1 && c <= MaxSpecK && m.nVer[c] < 2 && ss.optimisticRate(c) > bar {
				return c
			}
		}
	}
	return 0
}

// optimisticRate is ExpectedRate(k) with a verify batch of k+1 costing one
// plain step (v(1) = 1): an upper bound on what k could deliver before its
// batch size is measured. It took an unmeasured v(k+1) as the v(m) of the
// largest measured m ≤ k+1 (a batch costs at least about as much as a
// smaller one), which ggml's repacked Q4_0 gemm breaks: it takes 4 rows at
// a time, and bench --spec-sweep measured v(2) ≈ 1.9, v(3) ≈ 2.8, v(4) ≈
// 1.3 (SYNTHETIC l1b, one thread), so after v(3) auto K never tried K = 3,
// the best fixed K (1.53× plain at α 0.89), and ended at K = 0.
func (ss *SpecSensors) optimisticRate(k int) float64 {
	o := *ss
	o.VerifyCost[k] = 1
	return o.ExpectedRate(k)
}
