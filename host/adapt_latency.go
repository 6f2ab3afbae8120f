package host

import (
	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/native"
)

// DefaultLayerLatencyEvery is how often (in decode steps) the native engine
// times each layer when a policy or --stats-json wants per-layer latency.
// Unsampled steps cost nothing; a sampled step adds one clock read per
// graph node.
const DefaultLayerLatencyEvery = 16

// LayerLatency is one sampled step's per-layer timing (µs).
type LayerLatency = engine.LayerLatency

// LayerLatencySampler is implemented by sessions that measure each layer's
// decode time live (the native engine).
type LayerLatencySampler interface {
	// SetLayerLatencyEvery samples every n decode steps (0 = off).
	SetLayerLatencyEvery(n int) error
	// LastLayerLatency copies the latest sample into dst; false before one.
	LastLayerLatency(dst *LayerLatency) bool
}

var _ LayerLatencySampler = (*native.Session)(nil)

// enableLayerLatency turns per-layer sampling on (every
// DefaultLayerLatencyEvery steps) when sess supports it; it reports whether
// it does.
func enableLayerLatency(sess Session) bool {
	ls, ok := sess.(LayerLatencySampler)
	return ok && ls.SetLayerLatencyEvery(DefaultLayerLatencyEvery) == nil
}

// fillLayerLatency puts ls's latest per-layer sample into s (with
// PresentLayerLatency) when it has one and the sensor source (a trace) did
// not fill the field.
func fillLayerLatency(ls LayerLatencySampler, s *abi.Sensors) {
	if s.Has(abi.PresentLayerLatency) { // a trace's (SIMULATED) values win
		return
	}
	var ll LayerLatency
	if !ls.LastLayerLatency(&ll) {
		return
	}
	for i, us := range ll.Layers {
		if i < abi.MaxLayers {
			s.LayerLatencyUS[i] = float32(us)
		}
	}
	s.LayerCount = int32(min(len(ll.Layers), abi.MaxLayers))
	s.Present |= abi.PresentLayerLatency
	// What the sample was measured on (ABI 1.6): a verify batch of K+1
	// tokens, or a pass deep in the context, is slower per layer than a
	// plain step early on without anything being wrong.
	s.LayerLatencyBatch, s.LayerLatencyPos = int32(ll.Tokens), int32(ll.Pos)
	s.Present |= abi.PresentLatencyShape
}
