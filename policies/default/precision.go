package main

import "github.com/edgellm/edgellm/abi"

// The per-layer precision controller, used when the host sends a precision
// manifest (ABI 1.2, PresentManifest): it replaces the heuristic throughput
// controller (throughput.go), whose sensitivity ranks are guessed from the
// layer's position and whose floor is MinLayerBits for every layer.
//
//   - Throughput: the target is TokPerSecTarget when the embedding app sets
//     it (PresentTokTarget), else TargetTokPerSec. Below the band it demotes
//     the least sensitive layer (largest LayerSensRank) that is above its
//     floor one ladder step; above the band, and cooler than MODERATE, it
//     promotes the most sensitive layer (rank 0 first) below its ceiling.
//     At most once per ThroughputHoldSteps steps.
//   - Floor and ceiling: a layer never goes below max(LayerMinBits,
//     MinLayerBits) nor above min(LayerMaxBits, MaxLayerBits).
//   - Latency spike: a layer whose latency relative to its siblings in the
//     same sample (its latency ÷ the median over the layers) reaches
//     SpikeRatio × the moving average of that ratio drops to its floor at
//     once (no hold); the others stay. Context growth and a change of the
//     verify batch (speculation's K) slow every layer of a sample alike, so
//     they never read as a spike; a slowdown of one layer is caught at the
//     first new sample after SpikeWarmSamples.
//     Not every layer grows alike: a sliding-window layer's attention stops
//     growing at its window while a full-attention layer's keeps growing
//     with the context, and in a verify batch of K+1 tokens attention grows
//     K+1-fold while the weight reads do not. With ABI 1.6's
//     layer_latency_batch and layer_latency_pos (PresentLatencyShape) the
//     moving averages are kept per batch size (1 to MaxSpecK+1; a prefill
//     is neither judged nor folded in), and normalised by context: a
//     layer's time is its weight reads plus attention at most linear in
//     the context, and its siblings' times do not shrink as it grows, so
//     from context p0 to p its ratio to the median grows by at most p/p0.
//     The threshold is SpikeRatio × the average ratio × max(1, p ÷ the
//     moving average of the samples' positions), which context growth
//     alone cannot cross when the ratio is affine in the context (a layer
//     past its window against full-attention ones, or the reverse). A batch
//     size's average is started again when the context has more than
//     doubled (plus StaleContextSlack) since it last took a sample. Within a
//     run of samples the relaxation is small (the average position lags the
//     context by about 4 samples' worth of tokens); a slowdown that starts
//     while speculation uses another K is judged when that K comes back,
//     with the threshold relaxed by the context grown meanwhile; one that
//     starts right when K comes back after a long gap can be folded into
//     that K's average unseen (latency_test.go).
//   - Thermal: at MODERATE the mean bits of the layers may not exceed
//     HotBudgetBits, at SEVERE or above HotterBudgetBits: above the budget
//     one layer is demoted per hold period whatever the throughput.
const (
	SpikeRatio       = 1.5
	SpikeWarmSamples = 3   // latency samples before spikes are judged
	LatencyAlpha     = 0.2 // weight of a new sample in the moving average
	// StaleContextSlack: a batch size's latency average is stale once the
	// context exceeds 2 × its last sample's position + this many tokens.
	StaleContextSlack = 64
	HotBudgetBits     = 6
	HotterBudgetBits  = 5
)

// precState is the controller's memory (part of state, so reset clears it).
type precState struct {
	// by[b] is the baseline of samples measured on batches of b tokens
	// (ABI 1.6); by[0] holds samples of unknown batch (older hosts, traces).
	by      [abi.MaxSpecK + 2]latBaseline
	lastLat [abi.MaxLayers]float32 // the last sample seen (repeated samples are skipped)
}

// latBaseline is one batch size's moving averages.
type latBaseline struct {
	avg     [abi.MaxLayers]float32 // moving average of each layer's latency ÷ the sample's median
	samples int
	pos     int32   // context position of the last sample folded in
	posAvg  float32 // moving average of the samples' positions (same weight as avg)
}

func layerFloor(s *abi.Sensors, i int) uint8 { return max(s.LayerMinBits[i], MinLayerBits) }
func layerCeiling(s *abi.Sensors, i int) uint8 {
	return min(max(s.LayerMaxBits[i], MinLayerBits), MaxLayerBits)
}

// ladderDown is the next ladder precision below b and ≥ floor (b if none).
func ladderDown(b, floor uint8) uint8 {
	for _, l := range ladder {
		if l < b && l >= floor {
			return l
		}
	}
	return b
}

// ladderUp is the next ladder precision above b and ≤ ceil (b if none).
func ladderUp(b, ceil uint8) uint8 {
	for i := len(ladder) - 1; i >= 0; i-- {
		if l := ladder[i]; l > b && l <= ceil {
			return l
		}
	}
	return b
}

// precisionControl runs the controller; false when there is no manifest
// (the caller then runs the heuristic one).
func precisionControl(s *abi.Sensors, d *abi.Decision, r *reason) bool {
	if !s.Has(abi.PresentManifest|abi.PresentCurrent) || s.LayerCount <= 0 {
		return false
	}
	n := min(int(s.LayerCount), abi.MaxLayers)
	if latencySpike(s, d, r, n) {
		return true
	}
	if st.layerChanged && s.Step-st.lastLayerStep < ThroughputHoldSteps {
		return true
	}
	target := float32(TargetTokPerSec)
	if s.Has(abi.PresentTokTarget) && s.TokPerSecTarget > 0 {
		target = s.TokPerSecTarget
	}
	var tps float32
	haveTPS := true
	switch {
	case s.Has(abi.PresentTokPerSecSmoothed):
		tps = s.TokPerSecSmoothed
	case s.Has(abi.PresentTokPerSec):
		tps = s.TokPerSec
	default:
		haveTPS = false
	}
	budget := float32(MaxLayerBits)
	if s.Has(abi.PresentThermalStatus) {
		switch {
		case s.ThermalStatus >= abi.ThermalSevere:
			budget = HotterBudgetBits
		case s.ThermalStatus >= abi.ThermalModerate:
			budget = HotBudgetBits
		}
	}
	var sum float32
	for i := 0; i < n; i++ {
		sum += float32(s.CurLayerBits[i])
	}
	overBudget := sum/float32(n) > budget
	switch {
	case overBudget || (haveTPS && tps < target*(1-TargetBand)):
		best := -1
		for i := 0; i < n; i++ {
			b := s.CurLayerBits[i]
			if b == 0 || ladderDown(b, layerFloor(s, i)) == b {
				continue
			}
			if best < 0 || s.LayerSensRank[i] > s.LayerSensRank[best] {
				best = i
			}
		}
		if best < 0 {
			return true
		}
		d.LayerBits[best] = ladderDown(s.CurLayerBits[best], layerFloor(s, best))
		if overBudget {
			r.set(abi.ReasonThermal, "thermal budget: layer ")
		} else {
			r.set(abi.ReasonThroughput, "slow ")
			r.addInt(int64(tps))
			r.add(" tok/s: layer ")
		}
		changed(s, d, r, best)
	case haveTPS && tps > target*(1+TargetBand) && budget == MaxLayerBits:
		best := -1
		for i := 0; i < n; i++ {
			b := s.CurLayerBits[i]
			if b == 0 || ladderUp(b, layerCeiling(s, i)) == b {
				continue
			}
			if best < 0 || s.LayerSensRank[i] < s.LayerSensRank[best] {
				best = i
			}
		}
		if best < 0 {
			return true
		}
		d.LayerBits[best] = ladderUp(s.CurLayerBits[best], layerCeiling(s, best))
		r.set(abi.ReasonThroughput, "fast ")
		r.addInt(int64(tps))
		r.add(" tok/s: layer ")
		changed(s, d, r, best)
	}
	return true
}

func changed(s *abi.Sensors, d *abi.Decision, r *reason, i int) {
	r.addInt(int64(i))
	r.add(" ")
	r.tierMove(int32(s.CurLayerBits[i]), int32(d.LayerBits[i]))
	r.add("b")
	st.lastLayerStep = s.Step
	st.layerChanged = true
}

// latencySpike folds a new latency sample into the moving averages and
// drops every spiking layer to its floor; true when it moved one.
func latencySpike(s *abi.Sensors, d *abi.Decision, r *reason, n int) bool {
	p := &st.prec
	if !s.Has(abi.PresentLayerLatency) {
		return false
	}
	same := true
	for i := 0; i < n; i++ {
		same = same && s.LayerLatencyUS[i] == p.lastLat[i]
	}
	if same { // not a new sample (the engine samples every N steps)
		return false
	}
	copy(p.lastLat[:n], s.LayerLatencyUS[:n])
	bl := &p.by[0]
	if s.Has(abi.PresentLatencyShape) {
		b := int(s.LayerLatencyBatch)
		if b < 1 || b >= len(p.by) {
			return false // a prefill, or nonsense: neither judged nor folded in
		}
		bl = &p.by[b]
		if bl.samples > 0 && s.LayerLatencyPos > 2*bl.pos+StaleContextSlack {
			bl.samples = 0 // taken at a much shorter context: start again
		}
		bl.pos = s.LayerLatencyPos
	}
	grow := float32(1) // the context grown since the average: the threshold's relaxation
	pos := float32(max(s.LayerLatencyPos, 1))
	if bl != &p.by[0] {
		if bl.samples == 0 {
			bl.posAvg = pos
		}
		grow = max(1, pos/bl.posAvg)
		bl.posAvg += LatencyAlpha * (pos - bl.posAvg)
	}
	// The median over the layers of this sample: the step's own baseline.
	var sorted [abi.MaxLayers]float32
	copy(sorted[:n], s.LayerLatencyUS[:n])
	for i := 1; i < n; i++ { // insertion sort: no allocation in the guest
		for j := i; j > 0 && sorted[j] < sorted[j-1]; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	med := sorted[n/2]
	if n%2 == 0 && n > 0 {
		med = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	moved := -1
	for i := 0; i < n; i++ {
		if med <= 0 {
			continue
		}
		lat := s.LayerLatencyUS[i] / med // relative to the siblings
		if bl.samples >= SpikeWarmSamples && lat >= SpikeRatio*grow*bl.avg[i] && bl.avg[i] > 0 {
			if f := layerFloor(s, i); s.CurLayerBits[i] > f {
				d.LayerBits[i] = f
				if moved < 0 {
					moved = i
				}
			}
		}
		if bl.samples == 0 {
			bl.avg[i] = lat
		} else {
			bl.avg[i] += LatencyAlpha * (lat - bl.avg[i])
		}
	}
	bl.samples++
	if moved < 0 {
		return false
	}
	r.set(abi.ReasonThroughput, "latency spike: layer ")
	changed(s, d, r, moved)
	return true
}
