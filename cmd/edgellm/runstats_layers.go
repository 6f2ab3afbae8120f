package main

import (
	"github.com/edgellm/edgellm/cmd/edgellm/internal/runstats"
	"github.com/edgellm/edgellm/host"
)

// layerStats adds the native engine's live per-layer latency to --stats-json
// token records: "layer_latency_us":[…] (µs per layer) on the first token
// record after each new sample (every host.DefaultLayerLatencyEvery steps).
type layerStats struct {
	src      host.LayerLatencySampler
	ll       host.LayerLatency
	out      runstats.Layers
	lastStep int
}

// watchLayers turns per-layer sampling on for sess when it supports it.
func (r *runStats) watchLayers(sess host.Session) {
	if r == nil {
		return
	}
	ls, ok := sess.(host.LayerLatencySampler)
	if !ok || ls.SetLayerLatencyEvery(host.DefaultLayerLatencyEvery) != nil {
		return
	}
	r.lat.src = ls
	r.lat.ll.Layers = make([]float64, 0, 128)
}

// layers returns the latest sample if it is new, else nil.
func (r *runStats) layers() *runstats.Layers {
	l := &r.lat
	if l.src == nil || !l.src.LastLayerLatency(&l.ll) || l.ll.Step == l.lastStep {
		return nil
	}
	l.lastStep = l.ll.Step
	l.out = runstats.Layers{US: l.ll.Layers, StepUS: l.ll.Total}
	return &l.out
}
