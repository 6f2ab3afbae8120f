package main

import "github.com/edgellm/edgellm/abi"

// Layer sensitivity. The first and last layers of a transformer are the most
// sensitive to quantization (embedding-adjacent and output-adjacent: errors
// there are not averaged out by later layers), the middle ones the least. A
// layer's sensitivity rank is its distance to the nearer end,
// min(i, n-1-i). Lowering takes the least sensitive layer that can still go
// down (largest distance; ties: the later layer) one ladder step; raising
// takes the most sensitive layer that can still go up (smallest distance;
// ties: the earlier layer). So a layer reaches MinLayerBits before the next
// more sensitive one is touched: in a 6-layer model the lowering order is
// 3, 2, 4, 1, 5, 0 and the raising order 0, 5, 1, 4, 2, 3. The choice favours
// sensitivity over spreading the error; the ladder is 8 → 6 → 5 → 4 bits.

// ladder lists the precisions the controller moves between, high to low.
var ladder = [...]uint8{8, 6, 5, 4}

// lowerBits returns the next precision below b within the ladder (b if none).
func lowerBits(b uint8) uint8 {
	for _, l := range ladder {
		if l < b && l >= MinLayerBits {
			return l
		}
	}
	return b
}

// raiseBits returns the next precision above b within the ladder (b if none).
func raiseBits(b uint8) uint8 {
	for i := len(ladder) - 1; i >= 0; i-- {
		if l := ladder[i]; l > b && l <= MaxLayerBits {
			return l
		}
	}
	return b
}

func rank(i, n int) int { return min(i, n-1-i) }

// throughput lowers one layer's precision when the smoothed throughput is
// below the target band and raises one when it is above and the device is
// cooler than MODERATE; at most once per ThroughputHoldSteps steps.
func throughput(s *abi.Sensors, d *abi.Decision, r *reason) {
	if !s.Has(abi.PresentCurrent|abi.PresentLayerLatency) || s.LayerCount <= 0 {
		return
	}
	var tps float32
	switch {
	case s.Has(abi.PresentTokPerSecSmoothed):
		tps = s.TokPerSecSmoothed
	case s.Has(abi.PresentTokPerSec):
		tps = s.TokPerSec
	default:
		return
	}
	if st.layerChanged && s.Step-st.lastLayerStep < ThroughputHoldSteps {
		return
	}
	n := min(int(s.LayerCount), abi.MaxLayers)
	hot := s.Has(abi.PresentThermalStatus) && s.ThermalStatus >= abi.ThermalModerate
	best := -1
	switch {
	case tps < TargetTokPerSec*(1-TargetBand):
		for i := 0; i < n; i++ {
			b := s.CurLayerBits[i]
			if b == 0 || lowerBits(b) == b {
				continue
			}
			if best < 0 || rank(i, n) >= rank(best, n) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		from := s.CurLayerBits[best]
		d.LayerBits[best] = lowerBits(from)
		r.set(abi.ReasonThroughput, "slow ")
		r.addInt(int64(tps))
		r.add(" tok/s: layer ")
	case tps > TargetTokPerSec*(1+TargetBand) && !hot:
		for i := 0; i < n; i++ {
			b := s.CurLayerBits[i]
			if b == 0 || raiseBits(b) == b {
				continue
			}
			if best < 0 || rank(i, n) < rank(best, n) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		d.LayerBits[best] = raiseBits(s.CurLayerBits[best])
		r.set(abi.ReasonThroughput, "fast ")
		r.addInt(int64(tps))
		r.add(" tok/s: layer ")
	default:
		return
	}
	r.addInt(int64(best))
	r.add(" ")
	r.tierMove(int32(s.CurLayerBits[best]), int32(d.LayerBits[best]))
	r.add("b")
	st.lastLayerStep = s.Step
	st.layerChanged = true
}
