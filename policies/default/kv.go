package main

import "github.com/edgellm/edgellm/abi"

// The KV-type controller: under memory pressure the KV cache goes one type
// smaller (F32 → F16 → Q8_0 → Q4_0), and after a calm spell it comes back
// one type at a time, never above the type the session started with (the
// host refuses that anyway: a session's arena is sized for its start type).
//
// Going back up does not restore precision: the rows already requantized
// keep what they lost (host/adapt_kv.go); only the rows written afterwards
// are stored at the higher precision. It is still worth doing, because every
// token decoded after the pressure reads its own KV at full precision.
const (
	// KVHoldSteps is the minimum number of steps between two KV type
	// changes, so a reading oscillating around a band changes the type at
	// most once per KVHoldSteps steps.
	KVHoldSteps = 16
	// KVCalmSteps is how many steps memory must have been ample (and no
	// thermal or emergency state) before the KV type goes back up one type.
	KVCalmSteps = 32
)

// kvState is what the KV controller remembers.
type kvState struct {
	start      abi.KVType // the session's first reported type: the ceiling
	known      bool       // start is valid
	asked      abi.KVType // the type asked at the last change (KVUnknown: none pending)
	refused    uint8      // bit k: the engine did not take type k (never asked again)
	lastStep   uint64     // step of the last change asked
	changed    bool       // lastStep is valid
	ampleSince uint64     // step since which memory has been ample
	ample      bool       // ampleSince is valid
	// freed[k]: memory (MB) the last step down from type k freed, learnt
	// from the first reading after it; going back up to k must not put
	// memory straight back into the low band.
	freed     [5]int32
	usedAt    int32      // memUsed just before the last step down
	learnFrom abi.KVType // the type that step left (KVUnknown: nothing to learn)
}

// kvLadder is the KV types by size, smallest first.
var kvLadder = [...]abi.KVType{abi.KVQ4_0, abi.KVQ8_0, abi.KVF16, abi.KVF32}

// kvRank orders types by size (larger rank: more bytes per value; 0: not a
// type on the ladder).
func kvRank(t abi.KVType) int {
	for i, k := range kvLadder {
		if k == t {
			return i + 1
		}
	}
	return 0
}

// kvStep is the type delta places along the ladder from t (KVUnknown: off
// the ladder).
func kvStep(t abi.KVType, delta int) abi.KVType {
	if r := kvRank(t); r > 0 && r+delta >= 1 && r+delta <= len(kvLadder) {
		return kvLadder[r+delta-1]
	}
	return abi.KVUnknown
}

// kvSmaller and kvLarger are the next type down and up (KVUnknown: none).
func kvSmaller(t abi.KVType) abi.KVType { return kvStep(t, -1) }
func kvLarger(t abi.KVType) abi.KVType  { return kvStep(t, +1) }

// kvType runs the KV-type controller. It sets the reason unless a more
// important controller (thermal, emergency) set one this call, and joins a
// memory reason the tier controller set.
func kvType(s *abi.Sensors, d *abi.Decision, r *reason) {
	if !s.Has(abi.PresentCurrent) || kvRank(s.CurKVType) == 0 {
		return
	}
	k := &st.kv
	cur := s.CurKVType
	if !k.known {
		k.start, k.known = cur, true
	}
	// The last ask: an engine that kept its type cannot switch to that one
	// (an engine with a fixed KV type, or a type its arena cannot hold).
	if k.asked != abi.KVUnknown {
		if cur != k.asked {
			k.refused |= 1 << k.asked
			k.learnFrom = abi.KVUnknown
		}
		k.asked = abi.KVUnknown
	}
	low, ample, known := memoryHeadroom(s)
	if !known {
		k.ample = false
		return
	}
	if k.learnFrom != abi.KVUnknown {
		k.freed[k.learnFrom] = max(0, k.usedAt-memUsed(s))
		k.learnFrom = abi.KVUnknown
	}
	hot := s.Has(abi.PresentThermalStatus) && s.ThermalStatus >= abi.ThermalModerate
	if !ample || hot || st.emergency {
		k.ample = false
	} else if !k.ample {
		k.ampleSince, k.ample = s.Step, true
	}
	if k.changed && s.Step-k.lastStep < KVHoldSteps {
		return
	}
	next, code := abi.KVUnknown, abi.ReasonNone
	switch {
	case low:
		next, code = kvSmaller(cur), abi.ReasonMemoryPressure
	case k.ample && s.Step-k.ampleSince >= KVCalmSteps && kvRank(cur) < kvRank(k.start):
		next, code = kvLarger(cur), abi.ReasonMemoryHeadroom
		if next != abi.KVUnknown && !kvFits(s, k.freed[next]) {
			return
		}
	}
	if next == abi.KVUnknown || k.refused&(1<<next) != 0 {
		return
	}
	d.KVType = next
	k.asked, k.lastStep, k.changed = next, s.Step, true
	if code == abi.ReasonMemoryPressure {
		k.usedAt, k.learnFrom = memUsed(s), cur
	}
	switch r.code {
	case abi.ReasonThermal, abi.ReasonLowMemory:
		return // the more important reason stays
	case abi.ReasonMemoryPressure, abi.ReasonMemoryHeadroom:
		r.add(", kv ")
	default: // memory comes before throughput, speculation and threads
		if code == abi.ReasonMemoryPressure {
			r.set(code, "memory low: kv ")
		} else {
			r.set(code, "memory ok: kv ")
		}
	}
	r.add(cur.String())
	r.add("→")
	r.add(next.String())
}

// kvFits reports whether taking freed MB back would leave memory out of the
// low band.
func kvFits(s *abi.Sensors, freed int32) bool {
	if freed <= 0 {
		return true
	}
	after := *s
	after.CgroupUsageMB += freed
	after.MemAvailableMB -= freed
	low, _, _ := memoryHeadroom(&after)
	return !low
}
