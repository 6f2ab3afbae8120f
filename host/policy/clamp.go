package policy

import (
	"math"
	"runtime"
	"strings"

	"github.com/edgellm/edgellm/abi"
)

// Limits is what the engine can do. Decisions are validated against it and
// clamped into it; see RATIONALE.md for the rules.
type Limits struct {
	NTiers     int          // tiers available, ≥ 1 (tier 0 = highest precision)
	NLayers    int          // model layers, 1..abi.MaxLayers
	MaxK       int          // largest speculation K, 0..abi.MaxSpecK (0: no speculation)
	MaxWindow  int          // context length in tokens: the largest KV window
	KVTypes    []abi.KVType // KV types the engine can switch to (empty: none)
	MaxThreads int          // largest thread count, ≥ 1
	MaxCadence int          // largest CadenceSteps, ≥ 1
	// MinBits and MaxBits bound each layer's precision; nil means 2 and 16
	// for every layer, otherwise their length is NLayers.
	MinBits, MaxBits []uint8
	// CPUs is the set of CPUs the process may use, bit i = CPU i (0: any);
	// DraftCPUMask and VerifyCPUMask are kept within it.
	CPUs uint64
}

// DefaultLimits is a permissive single-tier engine: 128 layers, K ≤ 8,
// a 2048-token context, every KV type, all CPUs.
func DefaultLimits() Limits {
	return Limits{
		NTiers: 1, NLayers: abi.MaxLayers, MaxK: abi.MaxSpecK, MaxWindow: 2048,
		KVTypes:    []abi.KVType{abi.KVF16, abi.KVF32, abi.KVQ8_0, abi.KVQ4_0},
		MaxThreads: runtime.NumCPU(), MaxCadence: 1024,
	}
}

func (l Limits) validate() error {
	switch {
	case l.NTiers < 1:
		return configErrorf("limits: NTiers %d must be at least 1", l.NTiers)
	case l.NLayers < 1 || l.NLayers > abi.MaxLayers:
		return configErrorf("limits: NLayers %d out of range [1, %d]", l.NLayers, abi.MaxLayers)
	case l.MaxK < 0 || l.MaxK > abi.MaxSpecK:
		return configErrorf("limits: MaxK %d out of range [0, %d]", l.MaxK, abi.MaxSpecK)
	case l.MaxWindow < 1:
		return configErrorf("limits: MaxWindow %d must be positive", l.MaxWindow)
	case l.MaxThreads < 1:
		return configErrorf("limits: MaxThreads %d must be positive", l.MaxThreads)
	case l.MaxCadence < 1:
		return configErrorf("limits: MaxCadence %d must be positive", l.MaxCadence)
	}
	for _, k := range l.KVTypes {
		if k.String() == "" {
			return configErrorf("limits: unknown KV type %d", k)
		}
	}
	for _, b := range [][]uint8{l.MinBits, l.MaxBits} {
		if b != nil && len(b) != l.NLayers {
			return configErrorf("limits: MinBits/MaxBits have %d entries, want NLayers = %d", len(b), l.NLayers)
		}
	}
	for i := 0; i < l.NLayers && l.MinBits != nil && l.MaxBits != nil; i++ {
		if snapBits(l.MinBits[i]) != l.MinBits[i] || snapBits(l.MaxBits[i]) != l.MaxBits[i] || l.MinBits[i] > l.MaxBits[i] {
			return configErrorf("limits: layer %d bits [%d, %d] not valid precisions (2..8, 16) in order", i, l.MinBits[i], l.MaxBits[i])
		}
	}
	return nil
}

// ClampSet says which fields of a decision were clamped (a bit set, so that
// reporting it does not allocate).
type ClampSet uint16

// Clamp bits.
const (
	ClampTier ClampSet = 1 << iota
	ClampSpecK
	ClampWindow
	ClampAnchors
	ClampThreads
	ClampCadence
	ClampKVType
	ClampLayerBits
	ClampLayerWindowScale
	ClampSpecPMin
	ClampDraftThreads
	ClampCPUMask
	ClampRepackLayers
	ClampDraft
	ClampKVEvict
)

var clampNames = [...]string{"tier", "spec_k", "window", "anchors", "threads", "cadence_steps", "kv_type", "layer_bits", "layer_window_scale", "spec_p_min", "draft_threads", "cpu_mask", "repack_layers", "draft", "kv_evict"}

// Names lists the clamped fields by their ABI names.
func (c ClampSet) Names() []string {
	var out []string
	for i, n := range clampNames {
		if c&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

func (c ClampSet) String() string { return strings.Join(c.Names(), ",") }

// invalidReason explains why a decision cannot be clamped (it is garbage) or
// returns "" when it can. It does not allocate.
func invalidReason(d *abi.Decision) string {
	switch {
	case d.Tier < 0:
		return "negative tier"
	case d.SpecK < 0:
		return "negative spec_k"
	case d.Window < 0:
		return "negative window"
	case d.Anchors < 0:
		return "negative anchors"
	case d.Threads < 0:
		return "negative threads"
	case d.CadenceSteps < 0:
		return "negative cadence_steps"
	case d.KVType > abi.KVQ4_0:
		return "unknown kv_type code"
	case d.DraftThreads < 0:
		return "negative draft_threads"
	case math.IsNaN(float64(d.SpecPMin)) || d.SpecPMin < 0:
		return "NaN or negative spec_p_min"
	}
	for _, s := range d.LayerWindowScale {
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			return "NaN or Inf in layer_window_scale"
		}
	}
	return ""
}

// snapBits maps a requested precision to a valid one (2..8 or 16), rounding
// down so a clamp never costs more memory than asked: 1 → 2, 9..15 → 8,
// above 16 → 16. 0 ("leave as is") stays 0.
func snapBits(b uint8) uint8 {
	switch {
	case b == 0:
		return 0
	case b < 2:
		return 2
	case b <= 8:
		return b
	case b < 16:
		return 8
	}
	return 16
}

// clamp forces a valid decision into the engine's limits; cur is the
// pre-filled decision (the engine's current state). kvMask has bit k set for
// each allowed abi.KVType k. It does not allocate.
func (l *Limits) clamp(d, cur *abi.Decision, kvMask uint8) ClampSet {
	var c ClampSet
	clampI32 := func(v *int32, max int, bit ClampSet) {
		if int(*v) > max {
			*v = int32(max)
			c |= bit
		}
	}
	clampI32(&d.Tier, l.NTiers-1, ClampTier)
	clampI32(&d.SpecK, l.MaxK, ClampSpecK)
	clampI32(&d.Window, l.MaxWindow, ClampWindow)
	maxAnchors := l.MaxWindow
	if d.Window > 0 {
		maxAnchors = int(d.Window)
	}
	clampI32(&d.Anchors, maxAnchors, ClampAnchors)
	clampI32(&d.Threads, l.MaxThreads, ClampThreads)
	clampI32(&d.DraftThreads, l.MaxThreads, ClampDraftThreads)
	clampI32(&d.CadenceSteps, l.MaxCadence, ClampCadence)
	// Every layer and the output head: NLayers + 1. Negative leaves the count
	// as is; the engine's own bound (Sensors.RepackLayersMax) is the host's.
	clampI32(&d.RepackLayers, l.NLayers+1, ClampRepackLayers)
	// Draft (1.6): 0 leave, 1 attach, 2 detach; anything else leaves the
	// draft as it is. Whether the engine has a draft is the adapter's.
	if d.Draft != abi.DraftLeave && d.Draft != abi.DraftAttach && d.Draft != abi.DraftDetach {
		d.Draft = abi.DraftLeave
		c |= ClampDraft
	}
	// KVEvict (1.7): 0 leave, 1 drop, 2 merge; anything else leaves it.
	if d.KVEvict != abi.EvictLeave && d.KVEvict != abi.EvictDrop && d.KVEvict != abi.EvictMerge {
		d.KVEvict = abi.EvictLeave
		c |= ClampKVEvict
	}
	if d.SpecPMin > 1 {
		d.SpecPMin = 1
		c |= ClampSpecPMin
	}
	// A CPU mask keeps the allowed CPUs it names; one that names none of
	// them keeps the current mask.
	for _, m := range [2]struct{ v, cur *uint64 }{{&d.DraftCPUMask, &cur.DraftCPUMask}, {&d.VerifyCPUMask, &cur.VerifyCPUMask}} {
		if *m.v == 0 || l.CPUs == 0 || *m.v&^l.CPUs == 0 {
			continue
		}
		if nv := *m.v & l.CPUs; nv != 0 {
			*m.v = nv
		} else {
			*m.v = *m.cur & l.CPUs
		}
		c |= ClampCPUMask
	}
	// Keeping the type in force is always possible, even for an engine
	// that cannot switch (kvMask 0): only a change can be clamped.
	if d.KVType != abi.KVUnknown && d.KVType != cur.KVType && kvMask&(1<<d.KVType) == 0 {
		d.KVType = cur.KVType // an engine that cannot switch keeps its type
		// Keeping the type in force is always possible, even for an engine
		// that cannot switch (kvMask 0): only a change can be clamped.
		if d.KVType != abi.KVUnknown && d.KVType != cur.KVType && kvMask&(1<<d.KVType) == 0 {
			d.KVType = abi.KVUnknown
		}
		c |= ClampKVType
	}
	for i := range d.LayerBits {
		b := d.LayerBits[i]
		if b == 0 {
			continue
		}
		nb := snapBits(b)
		if i >= l.NLayers {
			nb = 0 // no such layer
		} else {
			lo, hi := uint8(2), uint8(16)
			if l.MinBits != nil {
				lo = l.MinBits[i]
			}
			if l.MaxBits != nil {
				hi = l.MaxBits[i]
			}
			nb = min(max(nb, lo), hi)
		}
		if nb != b {
			d.LayerBits[i] = nb
			c |= ClampLayerBits
		}
	}
	for i := range d.LayerWindowScale {
		s := d.LayerWindowScale[i]
		ns := s
		switch {
		case i >= l.NLayers, s < 0:
			ns = 0
		case s > 1:
			ns = 1
		}
		if ns != s {
			d.LayerWindowScale[i] = ns
			c |= ClampLayerWindowScale
		}
	}
	return c
}
