package native

import (
	"time"

	"github.com/edgellm/edgellm/abi/specmodel"
)

// Measurements for choosing K (the ABI 1.1 sensors): smoothed acceptance
// by draft position, the cost of a draft step and of a verify batch of n
// tokens relative to one plain target step, all measured on the running
// machine by the Speculator's own rounds. Running means of the first
// 1/specEMA samples, then exponential moving averages with weight specEMA
// (smooth); a quantity never measured reads as 0.

const specEMA = 0.1

// SpecSensors are the Speculator's measurements.
type SpecSensors struct {
	// AcceptByPos[i] is the smoothed acceptance at draft position i, given
	// that position i was reached (the drafts before it were accepted).
	AcceptByPos [MaxSpecK]float32
	// MeanAccepted is the smoothed number of drafts accepted per round.
	MeanAccepted float32
	// DraftCost is one draft step's time ÷ one plain target step's.
	DraftCost float32
	// VerifyCost[i] is a target batch of n = i+1 tokens ÷ one plain step
	// (v(n); VerifyCost[0] = 1 once a plain step was measured).
	VerifyCost [MaxSpecK + 1]float32
	KMax       int
	HaveAccept bool // acceptance measured (some round drafted)
	HaveCost   bool // plain step and draft step measured
}

// specMeter accumulates the measurements.
type specMeter struct {
	accept    [MaxSpecK]smooth
	meanAcc   smooth
	draftStep smooth // seconds per draft step
	verify    [MaxSpecK + 1]smooth
	nVer      [MaxSpecK + 1]int      // verify batches timed, by size
	obs       [MaxSpecK + 1]observed // whole rounds by tokens drafted (specauto.go)
	backoff   int                    // auto K's probes are autoProbeEvery << backoff apart
	explore   exploreBudget          // auto K's probes of unmeasured batch sizes (specauto.go)
	autoAcc   autoAccept             // auto K's own acceptance estimates (specauto.go)
}

// smooth is the running mean of the first 1/specEMA samples, then their
// exponential moving average with weight specEMA: an EMA alone would
// take its first sample (one round's acceptance, 0 or 1) as the estimate
// and forget it only slowly.
type smooth struct {
	x float64
	n int
}

func (s *smooth) add(v float64) {
	s.n++
	s.x += max(1/float64(s.n), specEMA) * (v - s.x)
}

func (s *smooth) have() bool { return s.n > 0 }

// round records a round: drafted nd tokens, accepted j, verify batch time.
func (m *specMeter) round(nd, j int, verify time.Duration) {
	for i := 0; i < nd && i <= j; i++ {
		v := 0.0
		if i < j {
			v = 1
		}
		if !m.accept[i].have() {
			m.accept[i].add(0.5) // prior: one pseudo-round at 0.5
		}
		m.accept[i].add(v)
	}
	if nd > 0 {
		m.meanAcc.add(float64(j))
	}
	m.nVer[nd]++
	if m.nVer[nd] == 2 {
		// the first batch of a size also paid for warm-up (its graph
		// built, its buffers first touched): the second one replaces it
		m.verify[nd] = smooth{}
	}
	m.verify[nd].add(verify.Seconds())
}

// draftSteps records the time of a draft's single-token steps.
func (m *specMeter) draftSteps(steps int, d time.Duration) {
	if steps > 0 {
		m.draftStep.add(d.Seconds() / float64(steps))
	}
}

// StepTimes are the smoothed absolute times behind the sensors: a draft
// step and a target batch of n = i+1 tokens (0 = not measured).
type StepTimes struct {
	Draft  time.Duration
	Verify [MaxSpecK + 1]time.Duration
}

// StepTimes returns the smoothed absolute step times.
func (sp *Speculator) StepTimes() StepTimes {
	m := &sp.meter
	var t StepTimes
	t.Draft = time.Duration(m.draftStep.x * float64(time.Second))
	for i, v := range m.verify {
		if v.have() {
			t.Verify[i] = time.Duration(v.x * float64(time.Second))
		}
	}
	return t
}

// Sensors returns the measurements so far.
func (sp *Speculator) Sensors() SpecSensors { return sp.meter.sensors() }

func (m *specMeter) sensors() SpecSensors {
	ss := SpecSensors{KMax: MaxSpecK, HaveAccept: m.meanAcc.have(), MeanAccepted: float32(m.meanAcc.x)}
	for i, a := range m.accept {
		if a.have() {
			ss.AcceptByPos[i] = float32(a.x)
		}
	}
	if !m.verify[0].have() || m.verify[0].x <= 0 {
		return ss
	}
	base := m.verify[0].x
	for i, v := range m.verify {
		if v.have() {
			ss.VerifyCost[i] = float32(v.x / base)
		}
	}
	if m.draftStep.x > 0 {
		ss.DraftCost = float32(m.draftStep.x / base)
		ss.HaveCost = true
	}
	return ss
}

// ExpectedRate is the expected tokens per unit of plain-step time at draft
// length k (specmodel.ExpectedRate: the model the default policy uses too).
func (ss *SpecSensors) ExpectedRate(k int) float64 {
	return specmodel.ExpectedRate(ss.AcceptByPos[:], ss.DraftCost, ss.VerifyCost[:], k)
}

// verifyCost is v(n), extrapolated where unmeasured (specmodel.Verify).
func (ss *SpecSensors) verifyCost(n int) float64 { return specmodel.Verify(ss.VerifyCost[:], n) }

// BestK is the draft length in 0..kMax with the highest expected rate; 0
// when no K beats plain decoding by margin (e.g. 0.02 for 2%).
func (ss *SpecSensors) BestK(kMax int, margin float64) int {
	return ss.bestKExcept(kMax, margin, nil, 1)
}

// bestKExcept is BestK over the K for which skip (nil = none) is false,
// with the expected rates multiplied by scale.
func (ss *SpecSensors) bestKExcept(kMax int, margin float64, skip func(k int) bool, scale float64) int {
	best, rate := 0, 1+margin
	for k := 1; k <= min(kMax, MaxSpecK); k++ {
		if skip != nil && skip(k) {
			continue
		}
		if r := scale * ss.ExpectedRate(k); r > rate {
			best, rate = k, r
		}
	}
	return best
}
