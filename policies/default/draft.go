package main

import "github.com/edgellm/edgellm/abi"

// The draft controller (ABI 1.6). A speculative draft holds memory (its KV;
// a draft model also its weights) for speed only: dropping it costs
// speculation's speedup and no precision, so under memory pressure (the
// low band, a critical trim level or the low-memory flag) it goes first,
// with the repacked weights, before the tier and KV-type controllers see
// what is left; the drop starts their holds. It comes back when memory is
// ample (no emergency, tier 0: precision comes back first), nothing
// memory-driven happened for TierHoldSteps steps, and what it held when
// dropped would not put memory back into the low band.
func draft(s *abi.Sensors, d *abi.Decision, r *reason) {
	if !s.Has(abi.PresentDraft) || s.DraftState == abi.DraftNone {
		return
	}
	crit := (s.Has(abi.PresentTrimLevel) && criticalTrim(s.TrimLevel)) ||
		(s.Has(abi.PresentLowMemory) && s.LowMemory)
	low, ample, known := memoryHeadroom(s)
	if s.DraftState == abi.DraftAttached {
		if crit || low {
			st.draftMB = s.DraftMB
			d.Draft = abi.DraftDetach
			memoryChange(s)
			r.set(abi.ReasonMemoryPressure, "memory low: draft dropped")
		}
		return
	}
	if !known || !ample || crit || st.emergency || memoryHeld(s) ||
		(s.Has(abi.PresentCurrent) && s.CurTier > 0) {
		return
	}
	cost := int32(st.draftMB + 1) // MiB, rounded up
	after := *s
	after.CgroupUsageMB += cost
	after.MemAvailableMB -= cost
	if lowAfter, _, _ := memoryHeadroom(&after); lowAfter {
		return
	}
	d.Draft = abi.DraftAttach
	memoryChange(s)
	r.set(abi.ReasonMemoryHeadroom, "memory ok: draft back")
}
