package native

import (
	"math"
	"time"
)

// Auto K (Speculator.SetAuto): before each round the Speculator picks the
// K with the highest expected rate E(K) / cost(K) from its own
// measurements (specMeter.choose), and checks the choice against what
// the rounds actually delivered:
//
//   - Acceptance: auto K keeps its own estimate of the acceptance at each
//     draft position (autoAccept: a memory of autoAcceptMemory tries,
//     each position drawn toward the one before it), not the policies'
//     ~10-round average of SpecSensors.AcceptByPos. With that average, at
//     α 0.6–0.65 a run of rejections read as α ≈ 0.4 often enough that
//     auto K ended at K = 0 in every SIMULATED run where K = 3 (repacked
//     v(n)) or K = 1 (q4x4 v(n)) pays 1.09× (0.90–0.93 of the best fixed
//     K; on the engine 0.93× plain where K = 3 gave 1.05–1.07×).
//   - v(1), the unit of every cost, is re-measured by a plain step every
//     autoPlainEvery rounds while K > 0. Without it the unit is the one
//     plain step taken before the first draft: a stale or unlucky unit
//     (a first step that paid for warm-up, a target whose step cost moves)
//     makes every v(n) and c wrong for the rest of the run, and K never
//     returns to 0 to correct them.
//   - Observed costs: once a K ran autoMinRounds rounds, its cost is their
//     time ÷ a plain round's (draft, verify and bookkeeping included), not
//     the formula's K·c + v(K+1), which assumes the costs add up and the
//     target's step cost is the same at every position: a K whose rounds
//     lose in practice is not kept. The other K's formula costs are
//     raised by the largest observed ÷ formula cost (discount), so the
//     same error does not just move the choice to the next K. It was the
//     observed token rate (a veto below plain, a discount by observed ÷
//     expected rate): that carried the acceptance's noise, and a K that
//     lost by a few percent by chance discounted every K (in a SIMULATED
//     α 0.7 run, by 0.91–0.95 for hundreds of rounds).
//   - Exploring probes (exploreBudget) run, first, each K whose verify
//     batch size was not measured twice and that could beat the choice if
//     that batch cost no more than a plain step, v(1), at acceptances
//     autoExploreZ standard errors above the estimates (once the run is
//     autoExploreHorizon plain steps long; the estimates before): a batch
//     of n costs at least v(1), but need not cost at least as much as a
//     smaller batch (ggml's repacked Q4_0 gemm takes 4 rows at a time:
//     v(2), v(3), v(4) ≈ 2.1, 2.8, 1.2); a size is measured twice (the
//     first batch also paid for warm-up). Then, while the choice is K = 0,
//     the K that would beat plain at those raised acceptances: a K that
//     may pay but was not measured enough to tell, until its estimates
//     narrow (without it, a run at K = 0 learns from one probe round in up
//     to 256 and does not come back from an unlucky start). They run only while what they lost against plain stays within
//     autoExploreShare of the run's time (taken as at least
//     autoExploreHorizon plain steps), so where nothing pays they cost
//     at most 2.5% of the run plus one probe (SIMULATED, 200 rounds:
//     0.955–0.983× plain, 0.960 with 3 steps of warm-up per batch size;
//     the raised acceptances cost up to 2% of that over 200 rounds).
//   - Probe rounds (specMeter.probeK) run at another K on a schedule: the
//     formula's best K if it is not the choice, then one above or below
//     the choice, so the measurements stay fresh.

const (
	// autoProbeEvery is the period of the probe rounds.
	autoProbeEvery = 16
	// autoPlainEvery is the period of the plain steps that refresh v(1)
	// while K > 0 (offset by half a period from the probes).
	autoPlainEvery = 32
	// autoMargin is how much a K's expected rate must beat plain by.
	autoMargin = 0.02
	// autoMinRounds is how many rounds at a K it takes before their
	// observed cost replaces the formula's (observedCost).
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
	// autoAcceptMemory is how many tries at a draft position auto K's
	// acceptance estimate remembers (autoAccept).
	autoAcceptMemory = 128
	// autoAcceptPrior is how many pseudo-tries draw a position's
	// acceptance estimate toward the one before it.
	autoAcceptPrior = 4
	// autoExploreZ is how many standard errors above its acceptance
	// estimates a K may still pay for the exploring probes to run it,
	// once the run is autoExploreHorizon plain steps long. From the start
	// (the estimates' errors are largest then) they spent the budget in
	// the first rounds of every run, which a short reply cannot win back:
	// SIMULATED, 40 rounds, 32 streams, α 0.4 (nothing pays): 0.88–0.92×
	// plain on the repacked and q4x4 v(n) (0.91–0.97 with the estimates
	// themselves, as now).
	autoExploreZ = 1.5
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
	if nd > 0 {
		m.autoAcc.add(nd, emitted-1) // a drafting round emits j+1
	}
	o.emitted.add(float64(emitted))
	o.time.add(d.Seconds())
	o.rounds++
}

// observedCost is the cost of a round that drafts k tokens, in plain
// rounds, as the rounds at k measured it (their time ÷ a plain round's):
// 0 before autoMinRounds of them. It includes what the formula's K·c +
// v(K+1) leaves out (bookkeeping, a draft sync, a step cost that changes
// with the position), and unlike an observed token rate it does not carry
// the acceptance's noise.
func (m *specMeter) observedCost(k int) float64 {
	ok, o0 := &m.obs[k], &m.obs[0]
	if k <= 0 || ok.rounds < autoMinRounds || o0.rounds < 2 || o0.time.x <= 0 {
		return 0
	}
	return ok.time.x / o0.time.x
}

// discount is the smallest ratio of the formula's cost to the observed
// one over the K that have an observed cost (capped at 1): the formula's
// other K are charged as much more, so a cost the formula misses at one K
// does not just move the choice to the next K the same error favours.
func (m *specMeter) discount(ss *SpecSensors) float64 {
	f := 1.0
	for k := 1; k <= MaxSpecK; k++ {
		if t := m.observedCost(k); t > 0 {
			f = min(f, (float64(k)*float64(ss.DraftCost)+ss.verifyCost(k+1))/t)
		}
	}
	return f
}

// rate is auto K's expected tokens per plain round at k (1 at k = 0): the
// acceptance of ss over the observed cost, else over the formula's cost
// divided by the discount f.
func (m *specMeter) rate(ss *SpecSensors, k int, f float64) float64 {
	if k <= 0 {
		return 1
	}
	e := ss.tokens(k)
	if t := m.observedCost(k); t > 0 {
		return e / t
	}
	return e * f / (float64(k)*float64(ss.DraftCost) + ss.verifyCost(k+1))
}

// tokens is E(K), the expected tokens of a round that drafts k.
func (ss *SpecSensors) tokens(k int) float64 {
	o := *ss
	o.DraftCost, o.VerifyCost[k] = 0, 1
	return o.ExpectedRate(k)
}

// choose is the K with the highest rate that beats plain by autoMargin
// (0 when none does).
func (m *specMeter) choose(ss *SpecSensors, f float64) int {
	best, r := 0, 1+autoMargin
	for k := 1; k <= MaxSpecK; k++ {
		if x := m.rate(ss, k, f); x > r {
			best, r = k, x
		}
	}
	return best
}

// nextK is the choice of K and the K of round step (1-based; they differ
// in probe rounds and plain refresh steps) in auto mode, from the
// measurements so far.
func (m *specMeter) nextK(step int) (choice, round int) {
	ss := m.autoSensors(0)
	switch {
	case m.nVer[0] < 2:
		return 0, 0 // measure plain steps first (the first one warms up)
	case !ss.HaveAccept || !ss.HaveCost:
		return autoStartK, autoStartK
	}
	best := ss.BestK(MaxSpecK, autoMargin)
	f := m.discount(&ss)
	k := m.choose(&ss, f)
	if k > 0 {
		m.backoff = 0
	}
	if c := m.explore.next(m, k, &ss, f); c > 0 {
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
// formula's choice (no observed costs): that best if it is not the
// choice (the conditions may have changed), else one above or below k in
// turn. (It also took the K nearest
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

// next is the K of an exploring probe round (0 = none now) for choice k
// (f: the discount).
func (e *exploreBudget) next(m *specMeter, k int, ss *SpecSensors, f float64) int {
	c := m.unmeasured(k, ss, f)
	o := &m.obs[0]
	if c == 0 || o.emitted.x <= 0 {
		return 0
	}
	// what the probe would lose, in plain rounds, by the estimates (the
	// loss is booked as measured after)
	cost := m.observedCost(c)
	if cost == 0 {
		cost = (float64(c)*float64(ss.DraftCost) + ss.verifyCost(c+1)) / f
	}
	lose := cost * (1 - m.rate(ss, c, f))
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

// unmeasured is the K an exploring probe should run for choice k, 0 when
// none: first the K nearest k (the smaller first) whose verify batch was
// measured at most once (the first batch of a size also pays for its
// warm-up) and that could beat the choice if that batch cost no more than
// a plain step (optimisticRate); the same K stays the nearest until its
// batch was measured twice, so its two probes run back to back when the
// budget allows. Else, while the choice is K = 0, the K whose rate beats
// plain by the most at acceptances raised by autoExploreZ standard errors:
// a K that may pay but was not measured enough to tell. (While a K > 0
// pays, the scheduled probes keep its neighbours measured; exploring them
// too cost 2-3% at α 0.9 over 200 rounds, SIMULATED q4x4 v(n).) Before
// the run is autoExploreHorizon plain steps long the acceptances are not
// raised (see autoExploreZ).
func (m *specMeter) unmeasured(k int, ss *SpecSensors, f float64) int {
	bar := max(1+autoMargin, m.rate(ss, k, f))
	z := 0.0
	if o := &m.obs[0]; o.emitted.x > 0 && m.explore.total >= autoExploreHorizon*o.time.x/o.emitted.x {
		z = autoExploreZ // see autoExploreZ
	}
	hi := m.autoSensors(z)
	for d := 1; d < MaxSpecK; d++ {
		for _, c := range []int{k - d, k + d} {
			if c >= 1 && c <= MaxSpecK && m.nVer[c] < 2 && hi.optimisticRate(c) > bar {
				return c
			}
		}
	}
	best := 0
	for c := 1; c <= MaxSpecK; c++ {
		if r := m.rate(&hi, c, f); k == 0 && r > bar {
			best, bar = c, r
		}
	}
	return best
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

// autoAccept is auto K's estimate of the acceptance at each draft
// position: decayed counts of the drafts accepted and tried there (a
// memory of autoAcceptMemory tries), each position's estimate drawn toward
// the one before it by autoAcceptPrior pseudo-tries (position 0 toward 0.5
// by one). SpecSensors.AcceptByPos (an average of the last ~10 rounds, for
// the policies) was auto K's: at α 0.65 its noise (±0.11) turned the
// choice over whenever it ran low, and once at K = 0 the probes (one round
// each, up to 256 rounds apart) could not bring it back; positions 2 and 3,
// reached by few rounds, read as 0.25 after two (SIMULATED).
type autoAccept struct {
	acc, n [MaxSpecK]float64
}

// add records a round that drafted nd tokens and accepted j.
func (a *autoAccept) add(nd, j int) {
	const keep = 1 - 1.0/autoAcceptMemory
	for i := 0; i < nd && i <= j; i++ {
		a.n[i] = a.n[i]*keep + 1
		a.acc[i] *= keep
		if i < j {
			a.acc[i]++
		}
	}
}

// autoSensors are the sensors with auto K's acceptance estimates, raised
// by z standard errors.
func (m *specMeter) autoSensors(z float64) SpecSensors {
	ss := m.sensors()
	prior, w := 0.5, 1.0
	for i := range ss.AcceptByPos {
		a := &m.autoAcc
		x := (a.acc[i] + w*prior) / (a.n[i] + w)
		ss.AcceptByPos[i] = float32(min(1, x+z*math.Sqrt(x*(1-x)/(a.n[i]+w))))
		prior, w = x, autoAcceptPrior
	}
	return ss
}
