package main

import "github.com/edgellm/edgellm/abi"

// The repacked-weights controller (ABI 1.4). With repacked weights (the
// native engine's --repack) the matrices live twice: in the mapped file,
// page cache the kernel can drop, and in an anonymous copy in ggml's
// interleaved layout, faster (about 1.6× decode here) but memory the kernel
// cannot drop and a low-memory killer counts. Releasing the copy costs
// speed only and frees its memory at once; taking it back repacks it from
// the file (a few hundred ms for a 1B model).
//
// Under memory pressure (the low band, a critical trim level or the
// low-memory flag) it releases every unit before anything costs precision:
// the release starts the tier and KV-type holds, so those controllers first
// see what it freed. It takes the copy back whole when memory is ample
// (no emergency, tier 0: precision comes back first), nothing memory-driven
// happened for TierHoldSteps steps, and the copy's cost would not put memory
// back into the low band.
func repack(s *abi.Sensors, d *abi.Decision, r *reason) {
	if !s.Has(abi.PresentRepack) || s.RepackLayersMax <= 0 {
		return
	}
	cur, all := s.RepackLayers, s.RepackLayersMax
	crit := (s.Has(abi.PresentTrimLevel) && criticalTrim(s.TrimLevel)) ||
		(s.Has(abi.PresentLowMemory) && s.LowMemory)
	low, ample, known := memoryHeadroom(s)
	if cur > 0 && (crit || low) {
		d.RepackLayers = 0
		memoryChange(s)
		r.set(abi.ReasonMemoryPressure, "memory low: repacked ")
		r.tierMove(cur, 0)
		r.add(" layers")
		return
	}
	if cur >= all || !known || !ample || crit || st.emergency || memoryHeld(s) ||
		(s.Has(abi.PresentCurrent) && s.CurTier > 0) {
		return
	}
	cost := max(0, s.RepackMBMax-s.RepackMB)
	after := *s
	after.CgroupUsageMB += cost
	after.MemAvailableMB -= cost
	if lowAfter, _, _ := memoryHeadroom(&after); lowAfter {
		return
	}
	d.RepackLayers = all
	memoryChange(s)
	r.set(abi.ReasonMemoryHeadroom, "memory ok: repacked ")
	r.tierMove(cur, all)
	r.add(" layers")
}

// memoryHeld reports whether a tier or repack change made for memory (or
// a thermal tier change) happened less than TierHoldSteps steps ago.
func memoryHeld(s *abi.Sensors) bool {
	return st.tierChanged && s.Step-st.lastTierStep < TierHoldSteps
}

// memoryChange starts the tier and KV-type holds at this step: the next
// memory-driven change waits to see what this one did.
func memoryChange(s *abi.Sensors) {
	st.lastTierStep, st.tierChanged = s.Step, true
	st.kv.lastStep, st.kv.changed = s.Step, true
}
