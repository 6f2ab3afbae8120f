package native

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// SIMULATED: the auto-K controller (specMeter.nextK) driven by simulated
// rounds, with no model: each round drafts K tokens at c units each,
// verifies K+1 at v(K+1) units, accepts each draft with probability α
// (a seeded stream, so every run is the same), and may pay costs the
// formula does not see. One unit is one plain step. These check the
// controller's decisions against the costs it was given, not any speed.

// simCosts is a SIMULATED target and draft.
type simCosts struct {
	alpha   float64
	c       float64             // draft step
	v       func(n int) float64 // verify batch of n (v(1) = the plain step)
	warm    float64             // extra cost of the first batch of each size (warm-up)
	overRnd float64             // per drafting round, outside the timed draft and verify
}

// simRun runs rounds rounds of auto K (fixed >= 0: that K every round
// instead) and returns the tokens per unit, the share of rounds that ran
// plain and the choice at the end.
func simRun(sc simCosts, rounds, fixed int) (rate, plainShare float64, final int) {
	return simRunSeed(sc, rounds, fixed, 1)
}

// simRunSeed is simRun with the acceptance stream seeded by seed.
func simRunSeed(sc simCosts, rounds, fixed int, seed uint64) (rate, plainShare float64, final int) {
	const unit = float64(time.Millisecond)
	var m specMeter
	rng := rand.New(rand.NewPCG(seed, 2))
	seen := map[int]bool{}
	cost := func(n int) float64 {
		x := sc.v(n)
		if !seen[n] {
			seen[n] = true
			x += sc.warm
		}
		return x
	}
	var t, emitted float64
	plain := 0
	for step := 1; step <= rounds; step++ {
		k := fixed
		if fixed < 0 {
			final, k = m.nextK(step)
		}
		if k == 0 {
			d := cost(1)
			m.round(0, 0, time.Duration(d*unit))
			m.roundDone(0, 1, time.Duration(d*unit))
			t, emitted, plain = t+d, emitted+1, plain+1
			continue
		}
		dd := float64(k) * sc.c
		m.draftSteps(k, time.Duration(dd*unit))
		j := 0
		for j < k && rng.Float64() < sc.alpha {
			j++
		}
		dv := cost(k + 1)
		m.round(k, j, time.Duration(dv*unit))
		d := dd + dv + sc.overRnd
		m.roundDone(k, j+1, time.Duration(d*unit))
		t, emitted = t+d, emitted+float64(j+1)
	}
	return emitted / t, float64(plain) / float64(rounds), final
}

func linearV(slope float64) func(n int) float64 {
	return func(n int) float64 { return 1 + slope*float64(n-1) }
}

// TestSpecAutoFallsToPlain: when no K pays, auto K ends at 0, runs plain
// most of the time and stays within 5% of plain decoding (the probes
// cost the rest). "stale unit" is the first plain step paying 3 units of
// warm-up: with that step as the unit of every cost forever, every K
// looked cheap and auto K stayed at K > 0 (it never ran a plain step
// again); "hidden overhead" makes the formula say K pays while the rounds
// lose (1.2 units per drafting round outside the timed draft and verify):
// the observed rates veto it.
func TestSpecAutoFallsToPlain(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   simCosts
	}{
		{"every K loses", simCosts{alpha: 0.9, c: 0.45, v: linearV(0.5)}},
		{"every K loses, α 0.5", simCosts{alpha: 0.5, c: 0.3, v: linearV(0.3)}},
		{"stale unit", simCosts{alpha: 0.9, c: 0.45, v: linearV(0.5), warm: 3}},
		{"hidden overhead", simCosts{alpha: 0.9, c: 0.3, v: linearV(0.3), overRnd: 1.2}},
		// the costs bench --spec-sweep measured on the SYNTHETIC l1b Q4_0,
		// repacked, one thread (per-position agreement 0.7, α ≈ 0.8):
		// batches get no discount, so nothing pays
		{"measured, repacked l1b, α 0.8", simCosts{alpha: 0.8, c: 0.318, v: repackedV}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k := 1; k <= MaxSpecK; k++ { // the case is one where no K pays
				if r, _, _ := simRun(tc.sc, 2000, k); r >= 1 {
					t.Fatalf("bad case: fixed K = %d gives %.3f× plain", k, r)
				}
			}
			rate, plain, final := simRun(tc.sc, 2000, -1)
			t.Logf("auto: %.3f× plain, %.0f%% plain rounds, final K %d", rate, 100*plain, final)
			if final != 0 || plain < 0.85 || rate < 0.95 {
				t.Errorf("auto: final K %d, %.0f%% plain rounds, %.3f× plain; want K 0, ≥ 85%%, ≥ 0.95×", final, 100*plain, rate)
			}
			// 200 rounds is a short reply, where what the start and the
			// early probes cost counts most: 0.95–0.99× plain with the
			// start at K = 2 (0.94–0.99× at K = 4)
			r200, _, _ := simRun(tc.sc, 200, -1)
			t.Logf("auto over 200 rounds: %.3f× plain", r200)
			if r200 < 0.95 {
				t.Errorf("auto over 200 rounds: %.3f× plain; want ≥ 0.95×", r200)
			}
		})
	}
}

// repackedV is v(n) as bench --spec-sweep measured it on the SYNTHETIC
// llama3.2-1b Q4_0 with repacked weights at one thread: a batch of n costs
// about n steps.
func repackedV(n int) float64 {
	return []float64{1.000, 1.977, 2.916, 3.008, 4.063, 5.078, 5.914, 5.822, 6.756}[n-1]
}

// TestSpecAutoNearBestK: when speculation pays, auto K reaches at least
// 95% of the best fixed K's rate (its probes and plain refresh steps are
// the price) and beats plain.
func TestSpecAutoNearBestK(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   simCosts
	}{
		{"α 0.9, cheap batches", simCosts{alpha: 0.9, c: 0.1, v: linearV(0.05)}},
		{"α 0.7, cheap batches", simCosts{alpha: 0.7, c: 0.1, v: linearV(0.05)}},
		{"α 0.9, dearer batches", simCosts{alpha: 0.9, c: 0.2, v: linearV(0.2)}},
		{"α 0.9, warm-up", simCosts{alpha: 0.9, c: 0.1, v: linearV(0.05), warm: 3}},
		// v(n) of the SYNTHETIC llama3.2-1b Q4_0 at one thread (bench
		// --spec-sweep), with jumps at n = 5 and 9: a K the formula
		// extrapolates badly is found only by probing it
		{"α 0.97, stepped v(n)", simCosts{alpha: 0.97, c: 0.25, v: func(n int) float64 {
			return []float64{1.000, 1.625, 1.871, 2.002, 3.033, 3.404, 3.611, 3.250, 4.230}[n-1]
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			best, bestK := 1.0, 0
			for k := 1; k <= MaxSpecK; k++ {
				if r, _, _ := simRun(tc.sc, 2000, k); r > best {
					best, bestK = r, k
				}
			}
			rate, _, final := simRun(tc.sc, 2000, -1)
			t.Logf("auto %.3f× plain (final K %d), best fixed K %d %.3f×", rate, final, bestK, best)
			if bestK == 0 || rate < 0.95*best || math.IsNaN(rate) {
				t.Errorf("auto %.3f× plain, best fixed K %d %.3f×: want ≥ 0.95 of it", rate, bestK, best)
			}
			if r200, _, _ := simRun(tc.sc, 200, -1); r200 < 1 {
				t.Errorf("auto over 200 rounds: %.3f× plain; want it to pay already", r200)
			} else {
				t.Logf("auto over 200 rounds: %.3f× plain", r200)
			}
		})
	}
}

// repackedBentV is v(n) as bench --spec-sweep measured it on the SYNTHETIC
// llama3.2-1b Q4_0 with ggml's repacked kernels at one thread (c = 0.306,
// loaded machine, 2026-11-27): not monotone, because the repacked gemm
// takes 4 rows at a time and 1 or 2–3 rows go through slower paths.
func repackedBentV(n int) float64 {
	return []float64{1.000, 2.102, 2.769, 1.244, 2.196, 3.024, 3.794, 2.541, 3.377}[n-1]
}

// TestSpecAutoNonMonotoneV: SIMULATED. When v(n) is not monotone (the
// repacked kernels' v(4) is below v(2) and v(3)), auto K still ends at the
// best fixed K (K = 3) and reaches at least 0.9 of its rate over 2000
// rounds, and pays over 200, for each of 8 acceptance streams. Before the
// exploring probes it ended at K = 0 (on the real engine 0.68–0.84 of the
// best fixed K): after v(3) ≈ 2.8 it took every larger batch to cost at
// least as much, so it never tried K = 3 (v(4) ≈ 1.24).
func TestSpecAutoNonMonotoneV(t *testing.T) {
	sc := simCosts{alpha: 0.9, c: 0.306, v: repackedBentV}
	for seed := uint64(1); seed <= 8; seed++ {
		best, bestK := 1.0, 0
		for k := 1; k <= MaxSpecK; k++ {
			if r, _, _ := simRunSeed(sc, 2000, k, seed); r > best {
				best, bestK = r, k
			}
		}
		rate, _, final := simRunSeed(sc, 2000, -1, seed)
		r200, _, _ := simRunSeed(sc, 200, -1, seed)
		t.Logf("seed %d: auto %.3f× plain (final K %d), best fixed K %d %.3f×; over 200 rounds %.3f×", seed, rate, final, bestK, best, r200)
		if bestK == 0 || final != bestK || rate < 0.9*best || r200 <= 1 {
			t.Errorf("seed %d: auto %.3f× plain, final K %d, %.3f× over 200 rounds; best fixed K %d %.3f×: want that K, ≥ 0.9 of its rate, > 1 over 200",
				seed, rate, final, r200, bestK, best)
		}
	}
}

// q4x4V is v(n) as bench --kernels-vn measured it for edgellm's q4x4
// kernels with the software prefetch on the SYNTHETIC llama3.2-1b Q4_0 at
// one thread (thread CPU, 2026-11-27: v(2..8) = 1.17 … 2.15); v(9), not
// measured, is extrapolated from v(7) and v(8).
func q4x4V(n int) float64 {
	return []float64{1.000, 1.17, 1.37, 1.30, 1.60, 1.71, 1.87, 2.15, 2.43}[n-1]
}

// TestSpecAutoMidAcceptance: SIMULATED. At acceptance ≈ 0.6, where one K
// pays by a few times autoMargin, auto K ends at the best fixed K and
// reaches at least 0.93 of its rate over 2000 rounds, for each of 8
// acceptance streams: on ggml's repacked v(n) (not monotone; K = 3 pays
// 1.09× at α 0.65, nothing pays by more than 1% at α 0.6) and on the q4x4
// kernels' flatter one (K = 1 pays 1.09× at α 0.6). The rule before
// autoAccept ended at K = 0 in all 16 runs (0.90–0.93 of the best): its
// acceptance estimate, a ~10-round average, ran low by chance, the noisy
// observed rate of a losing K discounted every K, and once at K = 0 the
// probes (one round each, up to 256 rounds apart) could not bring it back.
// Now 0.94–0.96 (repacked) and 0.98–0.99 (q4x4) of the best.
func TestSpecAutoMidAcceptance(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   simCosts
	}{
		{"repacked bent v(n), α 0.65", simCosts{alpha: 0.65, c: 0.306, v: repackedBentV}},
		{"q4x4 v(n), α 0.6", simCosts{alpha: 0.6, c: 0.287, v: q4x4V}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 8; seed++ {
				best, bestK, second := 1.0, 0, 1.0
				for k := 1; k <= MaxSpecK; k++ {
					r, _, _ := simRunSeed(tc.sc, 2000, k, seed)
					if r > best {
						best, bestK, second = r, k, best
					} else if r > second {
						second = r
					}
				}
				if bestK == 0 || best < second*(1+2*autoMargin) {
					t.Fatalf("bad case: best fixed K %d %.3f×, next %.3f×: want one K ahead by 2 margins", bestK, best, second)
				}
				rate, _, final := simRunSeed(tc.sc, 2000, -1, seed)
				t.Logf("seed %d: auto %.3f× plain (final K %d, %.3f of the best), best fixed K %d %.3f×", seed, rate, final, rate/best, bestK, best)
				if final != bestK || rate < 0.93*best {
					t.Errorf("seed %d: auto %.3f× plain, final K %d; best fixed K %d %.3f×: want that K and ≥ 0.93 of its rate",
						seed, rate, final, bestK, best)
				}
			}
		})
	}
}
