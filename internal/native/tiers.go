package native

import (
	"errors"
	"fmt"
	"time"

	"github.com/edgellm/edgellm/host/engine"
)

// Tiers on the native engine: a tier ladder (the same model at several
// precisions, high to low) is loaded as weight sets, set i = tier i
// (Options.Tiers). A tier swap moves every layer and the embedding/output
// head to set i — pointer changes, the graph is rebuilt at the next step —
// and then advises the pages of the sets no session uses any more out of
// the process (Engine.AdviseUnused, MADV_DONTNEED by default), so a step
// down frees what the higher tier held. The KV arena is not touched: it
// holds activations, which do not depend on where the weights came from,
// as the llamacpp ladder's state restore also keeps them. Nothing is
// reloaded, serialised or copied.

// tierState is the engine's ladder state.
type tierState struct {
	on  bool // Options.Tiers
	cur int  // the tier of the last swap (new sessions start on it)
}

// checkTiers validates the tier options (the set count is checked against
// StartTier here, before anything is mapped).
func checkTiers(o Options) error {
	if !o.Tiers {
		if o.StartTier != 0 {
			return fmt.Errorf("native: start tier %d without a tier ladder", o.StartTier)
		}
		return nil
	}
	if n := 1 + len(o.ExtraSets); o.StartTier < 0 || o.StartTier >= n {
		return fmt.Errorf("native: start tier %d: the ladder has tiers 0..%d", o.StartTier, n-1)
	}
	return nil
}

// startSet is the set sessions start on: StartTier on a ladder, else 0.
func startSet(o Options) int {
	if o.Tiers {
		return o.StartTier
	}
	return 0
}

// Tiers is the number of tiers (1 unless loaded with Options.Tiers) and the
// current one (the last swap's, or StartTier).
func (e *Engine) Tiers() (n, cur int) {
	if !e.tier.on {
		return 1, 0
	}
	return len(e.sets), e.tier.cur
}

var _ engine.TierSwapper = (*Session)(nil)

// SwapTier moves every layer and the head to weight set `to` and advises the
// pages of the sets no session uses any more out of memory. The KV cache
// and its length are unchanged. Timings: Load is the switch itself (the
// graph is rebuilt at the next step, counted in Stats().GraphBuildTime),
// Unload the advise step; Serialize and Restore are zero (nothing is
// copied). A failing advise leaves the session on the new tier and says so.
func (s *Session) SwapTier(to int) (engine.SwapTimings, error) {
	e := s.eng
	t := engine.SwapTimings{From: s.headSet, To: to}
	switch {
	case !e.tier.on:
		return t, errors.New("tier swap: the engine was not loaded as a tier ladder")
	case s.kv == nil:
		return t, ErrClosed
	case to < 0 || to >= len(e.sets):
		return t, fmt.Errorf("tier swap: tier %d does not exist (0..%d)", to, len(e.sets)-1)
	}
	t0 := time.Now()
	for il := range s.layerSet {
		s.moveLayer(il, to)
	}
	if err := s.SetHeadSet(to); err != nil {
		return t, err
	}
	e.tier.cur = to
	t.Load = time.Since(t0)
	t0 = time.Now()
	_, err := e.AdviseUnused()
	t.Unload = time.Since(t0)
	if err != nil {
		return t, fmt.Errorf("tier swap to %d: done, but releasing the old tier failed: %w", to, err)
	}
	return t, nil
}
