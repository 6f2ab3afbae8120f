package host

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/engine"
)

// knob is one thing a decision changes. Every knob is applied in one shape
// (Adapter.apply): when differs reports a change, set makes it, may adjust
// d to what is now in force, and returns the change log's line ("" when
// nothing visible changed). An error from set means the session refused
// the change and nothing changed: the adapter logs it with want, counts it
// (PolicyStats.Refused), restores the knob's fields from the decision in
// force with keep, and decoding goes on (RATIONALE.md, "A failed change").
type knob struct {
	name    string
	differs func(d, old *abi.Decision) bool
	want    func(a *Adapter, d *abi.Decision) any
	set     func(a *Adapter, step int, d *abi.Decision, old abi.Decision) (string, error)
	keep    func(d *abi.Decision, old abi.Decision)
}

// knobs in the order they are applied: the draft before the KV type (a
// draft model's KV pins it), cadence last.
var knobs = [...]knob{
	{name: "tier",
		differs: func(d, old *abi.Decision) bool { return d.Tier != old.Tier },
		want:    func(_ *Adapter, d *abi.Decision) any { return d.Tier },
		set:     (*Adapter).setTier,
		keep:    func(d *abi.Decision, old abi.Decision) { d.Tier = old.Tier }},
	{name: "threads",
		differs: func(d, old *abi.Decision) bool { return d.Threads != old.Threads },
		want:    func(_ *Adapter, d *abi.Decision) any { return d.Threads },
		set:     (*Adapter).setThreads,
		keep:    func(d *abi.Decision, old abi.Decision) { d.Threads = old.Threads }},
	{name: "window",
		differs: func(d, old *abi.Decision) bool {
			return d.Window != old.Window || d.Anchors != old.Anchors || d.LayerWindowScale != old.LayerWindowScale
		},
		want: func(_ *Adapter, d *abi.Decision) any { return fmt.Sprintf("%d anchors %d", d.Window, d.Anchors) },
		set:  (*Adapter).setWindow,
		keep: func(d *abi.Decision, old abi.Decision) {
			d.Window, d.Anchors, d.LayerWindowScale = old.Window, old.Anchors, old.LayerWindowScale
		}},
	{name: "kv_evict",
		differs: func(d, old *abi.Decision) bool { return d.KVEvict != old.KVEvict },
		want:    func(_ *Adapter, d *abi.Decision) any { return evictNames[d.KVEvict] },
		set:     (*Adapter).setEvict,
		keep:    func(d *abi.Decision, old abi.Decision) { d.KVEvict = old.KVEvict }},
	{name: "layer bits",
		differs: func(d, old *abi.Decision) bool { return d.LayerBits != old.LayerBits },
		want: func(a *Adapter, d *abi.Decision) any {
			n := 1
			if ls, ok := a.sess.(LayerSetter); ok {
				n = len(ls.LayerSets())
			}
			return d.LayerBits[:min(max(n, 1), abi.MaxLayers)]
		},
		set: func(a *Adapter, _ int, d *abi.Decision, old abi.Decision) (string, error) {
			return applyLayerBits(a.sess, &d.LayerBits, old.LayerBits)
		},
		keep: func(d *abi.Decision, old abi.Decision) { d.LayerBits = old.LayerBits }},
	{name: "draft",
		differs: func(d, _ *abi.Decision) bool { return d.Draft != abi.DraftLeave },
		want: func(_ *Adapter, d *abi.Decision) any {
			if d.Draft == abi.DraftDetach {
				return "detach"
			}
			return "attach"
		},
		set:  (*Adapter).setDraft,
		keep: func(d *abi.Decision, _ abi.Decision) { d.Draft = abi.DraftLeave }},
	{name: "KV type",
		differs: func(d, old *abi.Decision) bool { return d.KVType != old.KVType },
		want:    func(_ *Adapter, d *abi.Decision) any { return d.KVType },
		set:     (*Adapter).setKVType,
		keep:    func(d *abi.Decision, old abi.Decision) { d.KVType = old.KVType }},
	{name: "spec k",
		differs: func(d, old *abi.Decision) bool { return d.SpecK != old.SpecK || d.SpecPMin != old.SpecPMin },
		want:    func(_ *Adapter, d *abi.Decision) any { return d.SpecK },
		set:     (*Adapter).setSpecK,
		keep:    func(d *abi.Decision, old abi.Decision) { d.SpecK, d.SpecPMin = old.SpecK, old.SpecPMin }},
	{name: "draft threads",
		differs: func(d, old *abi.Decision) bool {
			return d.DraftThreads != old.DraftThreads || d.DraftCPUMask != old.DraftCPUMask
		},
		want: func(_ *Adapter, d *abi.Decision) any {
			return fmt.Sprintf("%d mask %#x", d.DraftThreads, d.DraftCPUMask)
		},
		set: (*Adapter).setDraftThreads,
		keep: func(d *abi.Decision, old abi.Decision) {
			d.DraftThreads, d.DraftCPUMask = old.DraftThreads, old.DraftCPUMask
		}},
	{name: "verify mask",
		differs: func(d, old *abi.Decision) bool { return d.VerifyCPUMask != old.VerifyCPUMask },
		want:    func(_ *Adapter, d *abi.Decision) any { return fmt.Sprintf("%#x", d.VerifyCPUMask) },
		set:     (*Adapter).setVerifyMask,
		keep:    func(d *abi.Decision, old abi.Decision) { d.VerifyCPUMask = old.VerifyCPUMask }},
	{name: "repacked layers",
		differs: func(d, old *abi.Decision) bool { return d.RepackLayers != old.RepackLayers },
		want:    func(_ *Adapter, d *abi.Decision) any { return d.RepackLayers },
		set:     (*Adapter).setRepack,
		keep:    func(d *abi.Decision, old abi.Decision) { d.RepackLayers = old.RepackLayers }},
	{name: "cadence",
		differs: func(d, old *abi.Decision) bool { return d.CadenceSteps != old.CadenceSteps },
		want:    func(_ *Adapter, d *abi.Decision) any { return d.CadenceSteps },
		set: func(_ *Adapter, _ int, d *abi.Decision, old abi.Decision) (string, error) {
			return fmt.Sprintf("cadence %d→%d", old.CadenceSteps, d.CadenceSteps), nil
		},
		keep: func(d *abi.Decision, old abi.Decision) { d.CadenceSteps = old.CadenceSteps }},
}

// applyKnobs applies every knob of d that differs from old, in one shape,
// and returns the change log's lines.
func (a *Adapter) applyKnobs(step int, d *abi.Decision, old abi.Decision) []string {
	var changes []string
	for i := range knobs {
		k := &knobs[i]
		if !k.differs(d, &old) {
			continue
		}
		want := k.want(a, d)
		c, err := k.set(a, step, d, old)
		if err != nil {
			a.refused(step, k.name, want, err)
			k.keep(d, old)
			continue
		}
		if c != "" {
			changes = append(changes, c)
		}
	}
	return changes
}

func (a *Adapter) setTier(_ int, d *abi.Decision, old abi.Decision) (string, error) {
	t, err := a.sess.(TierSwapper).SwapTier(int(d.Tier))
	if err != nil {
		return "", err
	}
	a.st.Swaps++
	a.haveCan = false // what the new tier's engine can do: asked again
	return fmt.Sprintf("tier %d→%d (swap %.1f ms)", old.Tier, d.Tier, float64(t.Total().Microseconds())/1000), nil
}

func (a *Adapter) setThreads(_ int, d *abi.Decision, old abi.Decision) (string, error) {
	if err := a.sess.(ThreadSetter).SetThreads(int(d.Threads)); err != nil {
		return "", err
	}
	return fmt.Sprintf("threads %d→%d", old.Threads, d.Threads), nil
}

// setWindow sets the session's window, anchors and per-layer windows to
// d's (the session has a ring KV: policy.Apply kept them otherwise).
func (a *Adapter) setWindow(_ int, d *abi.Decision, old abi.Decision) (string, error) {
	// A window as large as the context means no eviction; the runtime
	// already clamped it to the context.
	window, anchors := int(d.Window), int(d.Anchors)
	if window >= a.ctx {
		window = 0
	} else if anchors+window+1 > a.ctx {
		window = a.ctx - anchors - 1
	}
	// Per-layer windows need a window and an engine that has them;
	// otherwise the scales stay as they were.
	scaled := d.LayerWindowScale != old.LayerWindowScale
	var lw []int
	if _, ok := a.sess.(LayerWindowSetter); ok && window > 0 {
		lw = layerWindows(window, &d.LayerWindowScale, a.eng.Info().NLayer)
	} else {
		d.LayerWindowScale = old.LayerWindowScale
	}
	var err error
	switch {
	case lw != nil:
		err = a.sess.(LayerWindowSetter).SetLayerWindows(anchors, lw)
	case d.Window != old.Window || d.Anchors != old.Anchors:
		err = a.sess.(WindowSetter).SetWindow(anchors, window)
	}
	if err != nil {
		return "", err
	}
	var c []string
	if d.Window != old.Window || d.Anchors != old.Anchors {
		c = append(c, fmt.Sprintf("window %d→%d anchors %d→%d", old.Window, d.Window, old.Anchors, d.Anchors))
	}
	if lw != nil && (scaled || slices.Min(lw) != slices.Max(lw)) {
		c = append(c, fmt.Sprintf("layer windows %v", lw))
	}
	return strings.Join(c, ", "), nil
}

func (a *Adapter) setEvict(_ int, d *abi.Decision, _ abi.Decision) (string, error) {
	if err := a.sess.(EvictSetter).SetEvictMode(evictNames[d.KVEvict]); err != nil {
		return "", err
	}
	return fmt.Sprintf("kv evict %s", evictNames[d.KVEvict]), nil
}

// setKVType requantizes the session's KV. A change made whose page
// release then failed is kept (noted in the log): only a refusal that
// changed nothing is an error.
func (a *Adapter) setKVType(step int, d *abi.Decision, old abi.Decision) (string, error) {
	r, err := a.sess.(KVTypeSetter).SetKVType(engine.KVTypeFromABI(d.KVType))
	if err != nil {
		if !r.Changed {
			return "", err
		}
		if a.log != nil {
			fmt.Fprintf(a.log, "[policy step %d: KV type %s: %v]\n", step, d.KVType, err)
		}
	}
	return fmt.Sprintf("KV %s→%s (requantized %d rows in %.1f ms, %d KiB released)",
		old.KVType, d.KVType, r.Rows, float64(r.Convert.Microseconds())/1000, r.Released/1024), nil
}
