package policy

import "github.com/edgellm/edgellm/abi"

// Abilities says which fields of a decision an engine can change while it
// decodes.
type Abilities struct {
	Tier         bool // swap tiers (a tier ladder)
	SpecK        bool // speculative decoding: SpecK, SpecPMin, DraftThreads, DraftCPUMask
	CPUMask      bool // the CPUs target steps run on (VerifyCPUMask)
	Window       bool // KV window and anchors
	LayerWindows bool // per-layer window scales
	Threads      bool // thread count
	KVType       bool // KV cache type
	LayerBits    bool // per-layer weight precision
	Repack       bool // repacked weights: RepackLayers (ABI 1.4)
	Draft        bool // detach and re-attach a draft model: Draft (ABI 1.6)
	Evict        bool // merge or drop what the KV window evicts: KVEvict (ABI 1.7)
}

// AllAbilities is an engine that can change every field: policytest's
// simulated engine.
var AllAbilities = Abilities{Tier: true, SpecK: true, CPUMask: true, Window: true, LayerWindows: true, Threads: true, KVType: true, LayerBits: true, Repack: true, Draft: true, Evict: true}

// Apply is the decision in force after an engine with the abilities can
// applied d over cur, the decision in force before. It is the one rule the
// host's Adapter follows and policytest simulates:
//
//   - a field the engine cannot change keeps cur's value;
//   - the ABI's "leave as is" values keep cur's value: KVUnknown, a
//     LayerBits entry of 0, Threads 0 (the host default: the count in
//     force), 0 in SpecPMin, DraftThreads, DraftCPUMask and
//     VerifyCPUMask, a negative RepackLayers, DraftLeave in Draft and
//     EvictLeave in KVEvict;
//   - Draft is a request, not a state: the result carries the engine's
//     answer to it (DraftAttach or DraftDetach) or DraftLeave;
//   - LayerWindowScale is taken whole: a 0 entry leaves that layer at the
//     full window (scale 1);
//   - CadenceSteps and the reason are taken as they are.
//
// The host then carries the changes out; one that fails at the engine
// keeps cur's value too, and a precision is snapped to the nearest weight
// set the engine has.
func Apply(cur, d abi.Decision, can Abilities) abi.Decision {
	n := cur
	n.CadenceSteps, n.ReasonCode, n.ReasonLen, n.ReasonText = d.CadenceSteps, d.ReasonCode, d.ReasonLen, d.ReasonText
	if can.Tier {
		n.Tier = d.Tier
	}
	if can.SpecK {
		n.SpecK = d.SpecK
		n.SpecPMin = keep(n.SpecPMin, d.SpecPMin)
		n.DraftThreads = keep(n.DraftThreads, d.DraftThreads)
		n.DraftCPUMask = keep(n.DraftCPUMask, d.DraftCPUMask)
	}
	if can.CPUMask {
		n.VerifyCPUMask = keep(n.VerifyCPUMask, d.VerifyCPUMask)
	}
	if can.Window {
		n.Window, n.Anchors = d.Window, d.Anchors
	}
	if can.Threads {
		n.Threads = keep(n.Threads, d.Threads)
	}
	if can.Repack && d.RepackLayers >= 0 {
		n.RepackLayers = d.RepackLayers
	}
	n.Draft = abi.DraftLeave
	if can.Draft && (d.Draft == abi.DraftAttach || d.Draft == abi.DraftDetach) {
		n.Draft = d.Draft
	}
	if can.Evict && (d.KVEvict == abi.EvictDrop || d.KVEvict == abi.EvictMerge) {
		n.KVEvict = d.KVEvict
	}
	if can.KVType && d.KVType != abi.KVUnknown {
		n.KVType = d.KVType
	}
	if can.LayerWindows {
		n.LayerWindowScale = d.LayerWindowScale
	}
	for i := range d.LayerBits {
		if can.LayerBits && d.LayerBits[i] != 0 {
			n.LayerBits[i] = d.LayerBits[i]
		}
	}
	return n
}

// keep is v, or cur when v is 0 ("leave as is").
func keep[T comparable](cur, v T) T {
	var zero T
	if v == zero {
		return cur
	}
	return v
}
