package main

import "github.com/edgellm/edgellm/host"

// roundStats writes one --stats-json round record per speculative round:
// Generate calls BeforeStep before each round, so the draft's counters
// since the last call are the round just done.
type roundStats struct {
	stats *runStats
	d     *host.Draft
	last  host.DraftStats
	i     int  // the first token of the round being counted
	begun bool // a round was started
}

// hook wraps next (may be nil) to record the round that ended.
func (r *roundStats) hook(next func(int) error) func(int) error {
	if r.stats == nil {
		return next
	}
	return func(pos int) error {
		r.record(pos)
		if next != nil {
			return next(pos)
		}
		return nil
	}
}

// record writes the round that produced tokens from r.i to pos (the tokens
// generated so far) and starts the next one at pos.
func (r *roundStats) record(pos int) {
	if r.stats == nil || pos == 0 {
		return // pos 0: the call before the prefill, not a round
	}
	st := r.d.Stats()
	if r.begun {
		r.stats.w.Round(r.i, r.d.K(), st.Drafted-r.last.Drafted, st.Accepted-r.last.Accepted)
	}
	r.last, r.i, r.begun = st, pos, true
}
