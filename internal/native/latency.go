package native

import (
	"fmt"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// Per-layer decode latency, measured live. Every N-th Decode (N set by
// SetLayerLatencyEvery) runs its graph with a node timer (kernels.NodeTimer:
// ggml-cpu's first thread stamps the time after each node), and the stamps
// at the layers' node boundaries (graph.layerEnd) give each layer's time.
// Other steps run the plain Compute: an unsampled step costs nothing. The
// graph's nodes are in layer order because build expands each layer's
// output before the next layer.

// LayerLatency is one sampled step's timing (defined in host/engine, where
// go doc shows its fields).
type LayerLatency = engine.LayerLatency

type layerLatency struct {
	every int
	timer *kernels.NodeTimer
	pre   []int32 // computed-node prefix counts of the sampled graph
	last  LayerLatency
	have  bool
}

func (l *layerLatency) close() {
	if l != nil {
		l.timer.Close()
	}
}

// SetLayerLatencyEvery samples the per-layer latency every n Decodes
// (0 = never, the default).
func (s *Session) SetLayerLatencyEvery(n int) error {
	if s.kv == nil {
		return ErrClosed
	}
	if n < 0 {
		return fmt.Errorf("native: layer latency every %d steps", n)
	}
	if n == 0 {
		s.lat.close()
		s.lat = nil
		return nil
	}
	if s.lat == nil {
		t, err := kernels.NewNodeTimer(graphNodes(s.cfg.NLayer))
		if err != nil {
			return err
		}
		s.lat = &layerLatency{timer: t}
	}
	s.lat.every = n
	return nil
}

// LastLayerLatency is the latest sample, ok false before the first one.
// dst.Layers is reused when it has room.
func (s *Session) LastLayerLatency(dst *LayerLatency) bool {
	if s.lat == nil || !s.lat.have {
		return false
	}
	layers := append(dst.Layers[:0], s.lat.last.Layers...)
	*dst = s.lat.last
	dst.Layers = layers
	return true
}

// compute runs the graph, timed per layer on sampled steps.
func (s *Session) compute(g *graph) error {
	l := s.lat
	if l == nil || (s.stats.Decodes+1)%l.every != 0 {
		return s.be.Compute(g.g)
	}
	start, nodes, err := s.be.ComputeTimed(g.g, l.timer)
	end := kernels.MonotonicNS()
	l.pre = g.g.ComputedPrefix(l.pre)
	if err != nil || len(nodes) != int(l.pre[len(l.pre)-1]) || len(g.layerEnd) != s.cfg.NLayer {
		return err // a partial or unexpected timing is not recorded
	}
	at := func(n int) int64 { // time when the first n nodes were done
		if k := l.pre[n]; k > 0 {
			return nodes[k-1]
		}
		return start
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	last := &l.last
	last.Step, last.Tokens, last.Pos = s.stats.Decodes+1, g.key.nTok, s.n
	last.Layers = last.Layers[:0]
	prev := g.layerStart
	for _, e := range g.layerEnd {
		last.Layers = append(last.Layers, us(at(e)-at(prev)))
		prev = e
	}
	last.Embed = us(at(g.layerStart) - start)
	last.Head = us(at(len(l.pre)-1) - at(prev))
	last.Total = us(end - start)
	l.have = true
	return nil
}
