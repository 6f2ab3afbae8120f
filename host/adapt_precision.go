package host

import (
	"fmt"

	"github.com/edgellm/edgellm/abi"
)

// The precision manifest and the throughput target reach the policy as ABI
// 1.2 sensors: LayerMinBits, LayerMaxBits, LayerSensRank (PresentManifest)
// and TokPerSecTarget (PresentTokTarget). A 1.0/1.1 guest never sees them
// (the host sends each guest its minor's prefix).

// precisionSensors is what the adapter adds to every policy call.
type precisionSensors struct {
	manifest bool
	min, max [abi.MaxLayers]uint8
	rank     [abi.MaxLayers]uint8
	target   float32 // tok/s; 0 = none
}

// SetManifest makes every later policy call carry m's per-layer min/max
// bits and sensitivity ranks. m must be for the adapter's model (its layer
// count is checked here; the digest where it was loaded).
func (a *Adapter) SetManifest(m *Manifest) error {
	if n := a.eng.Info().NLayer; len(m.Layers) != n || n > abi.MaxLayers {
		return fmt.Errorf("precision manifest: %d layers for a model of %d (at most %d)", len(m.Layers), n, abi.MaxLayers)
	}
	p := &a.prec
	for i, l := range m.Layers {
		p.min[i], p.max[i], p.rank[i] = uint8(min(l.MinBits, 255)), uint8(min(l.MaxBits, 255)), uint8(l.SensRank)
	}
	p.manifest = true
	return nil
}

// SetTokPerSecTarget sets the throughput target the policy sees (tok/s;
// 0 = none, the policy then uses its own default).
func (a *Adapter) SetTokPerSecTarget(tps float32) {
	a.prec.target = max(tps, 0)
}

// fill adds the manifest and the target to s.
func (p *precisionSensors) fill(s *abi.Sensors) {
	if p.manifest {
		s.LayerMinBits, s.LayerMaxBits, s.LayerSensRank = p.min, p.max, p.rank
		s.Present |= abi.PresentManifest
	}
	if p.target > 0 {
		s.TokPerSecTarget = p.target
		s.Present |= abi.PresentTokTarget
	}
}
