package main

import (
	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host"
)

// setStats adds the per-layer weight-set assignment of a session with
// --layer-sets to --stats-json ("sets" records, runstats.Writer.Sets), so a
// reader can tell the bits/weight each token was produced with.
type setStats struct {
	src      host.LayerSetter
	lastBits [abi.MaxLayers]uint8
	written  bool
}

// watchSets records the weight sets of sess when it has more than one.
func (r *runStats) watchSets(sess host.Session) {
	if r == nil {
		return
	}
	if ls, ok := sess.(host.LayerSetter); ok && len(ls.SetBits()) > 1 {
		r.sets.src = ls
	}
}

// setsBefore writes the assignment before token i's record when it is the
// first token or the policy's layer bits changed since the last record.
// It allocates only then.
func (r *runStats) setsBefore(i int) {
	s := &r.sets
	if s.src == nil {
		return
	}
	var bits [abi.MaxLayers]uint8
	if r.adapter != nil {
		bits = r.adapter.Current().LayerBits
	}
	if s.written && bits == s.lastBits {
		return
	}
	s.written, s.lastBits = true, bits
	r.w.Sets(i, s.src.LayerSets())
}
