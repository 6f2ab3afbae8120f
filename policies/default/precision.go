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
//   - Thermal: at MODERATE the mean bits of the layers may not exceed
//     HotBudgetBits, at SEVERE or above HotterBudgetBits: above the budget
//     one layer is demoted per hold period whatever the throughput.
const (
	SpikeRatio       = 1.5
	SpikeWarmSamples = 3   // latency samples before spikes are judged
	LatencyAlpha     = 0.2 // weight of a new sample in the moving average
	HotBudgetBits    = 6
	HotterBudgetBits = 5
)

// precState is the controller's memory (part of state, so reset clears it).
type precState struct {
	avg     [abi.MaxLayers]float32 // moving average of each layer's latency ÷ the sample's median
	samples int
	lastLat [abi.MaxLayers]float32 // the last sample folded in (repeated samples are skipped)
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
		p.lastLat[i] = s.LayerLatencyUS[i]
		if med <= 0 {
			continue
		}
		lat := s.LayerLatencyUS[i] / med // relative to the siblings
		if p.samples >= SpikeWarmSamples && lat >= SpikeRatio*p.avg[i] && p.avg[i] > 0 {
			if f := layerFloor(s, i); s.CurLayerBits[i] > f {
				d.LayerBits[i] = f
				if moved < 0 {
					moved = i
				}
			}
		}
		if p.samples == 0 {
			p.avg[i] = lat
		} else {
			p.avg[i] += LatencyAlpha * (lat - p.avg[i])
		}
	}
	p.samples++
	if moved < 0 {
		return false
	}
	r.set(abi.ReasonThroughput, "latency spike: layer ")
	changed(s, d, r, moved)
	return true
}
