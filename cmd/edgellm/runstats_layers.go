package main

import (
	"strconv"

	"github.com/edgellm/edgellm/host"
)

// layerStats adds the native engine's live per-layer latency to --stats-json
// token records: "layer_latency_us":[…] (µs per layer) on the first token
// record after each new sample (every host.DefaultLayerLatencyEvery steps).
type layerStats struct {
	src      host.LayerLatencySampler
	ll       host.LayerLatency
	lastStep int
}

// watchLayers turns per-layer sampling on for sess when it supports it.
func (r *runStats) watchLayers(sess host.Session) {
	if r == nil || !host.EnableLayerLatency(sess) {
		return
	}
	r.lat.src = sess.(host.LayerLatencySampler)
	r.lat.ll.Layers = make([]float64, 0, 128)
}

// layers appends the latest sample if it is new.
func (r *runStats) layers() {
	l := &r.lat
	if l.src == nil || !l.src.LastLayerLatency(&l.ll) || l.ll.Step == l.lastStep {
		return
	}
	l.lastStep = l.ll.Step
	r.buf = append(r.buf, `,"layer_latency_us":[`...)
	for i, us := range l.ll.Layers {
		if i > 0 {
			r.buf = append(r.buf, ',')
		}
		r.buf = strconv.AppendFloat(r.buf, us, 'f', 1, 64)
	}
	r.buf = append(r.buf, ']')
	r.float("step_compute_us", l.ll.Total)
}
