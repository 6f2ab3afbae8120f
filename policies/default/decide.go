package main

import "github.com/edgellm/edgellm/abi"

// Tuning constants. Tier 0 is the highest precision; a higher tier index is
// lower precision.
const (
	// TierHoldSteps is the minimum number of steps between two tier changes
	// made by the memory controller (also counted from a thermal change), so
	// a reading oscillating around a threshold changes the tier at most once
	// per TierHoldSteps steps.
	TierHoldSteps = 16
	// LowHeadroom and HighHeadroom are the bands on MemAvailable /
	// MemThreshold: below LowHeadroom the tier goes down, above HighHeadroom
	// it may come back up, in between it holds.
	LowHeadroom  = 1.5
	HighHeadroom = 3.0
	// LowFreeOfTotal and HighFreeOfTotal are the same bands on
	// MemAvailable / MemTotal, used when no threshold is known.
	LowFreeOfTotal  = 0.10
	HighFreeOfTotal = 0.25
	// CgroupHigh and CgroupLow are the bands on cgroup usage / limit.
	CgroupHigh = 0.90
	CgroupLow  = 0.75

	// EmergencyWindow is the KV window, in tokens, under a critical trim
	// level or the low-memory flag.
	EmergencyWindow = 256
	// RecoverSteps is how many calm steps restore the window saved before an
	// emergency.
	RecoverSteps = 32

	// MinK and MaxK bound speculation; AcceptWindow is the number of
	// acceptance samples averaged; AcceptHigh / AcceptLow move K up / down.
	MinK         = 2
	MaxK         = 8
	AcceptWindow = 8
	AcceptHigh   = 0.8
	AcceptLow    = 0.5

	// TargetTokPerSec is the throughput target; the controller acts outside
	// ±TargetBand of it, at most once per ThroughputHoldSteps steps, keeping
	// layer precision within [MinLayerBits, MaxLayerBits].
	TargetTokPerSec     = 15.0
	TargetBand          = 0.10
	ThroughputHoldSteps = 4
	MinLayerBits        = 4
	MaxLayerBits        = 8
)

// state is everything the policy remembers between calls.
type state struct {
	started       bool
	lastTierStep  uint64                // step of the last tier change by this policy
	tierChanged   bool                  // lastTierStep is valid
	thermalSeen   abi.ThermalStatus     // highest thermal status already acted on
	emergency     bool                  // the window is shrunk
	savedWindow   int32                 // window before the emergency
	calm          int                   // calm steps since the emergency cleared
	acc           [AcceptWindow]float32 // acceptance samples (ring)
	accN, accI    int
	lastLayerStep uint64
	layerChanged  bool
	// Per tier i: memory in use (MB) just before the memory controller left
	// tier i for i+1, and how much the next reading showed it freed. Going
	// back up to tier i costs about freed[i]; it happens only if that would
	// not put memory straight back into the low band (no bounce into OOM).
	downUsed [maxTrackedTiers]int32
	freed    [maxTrackedTiers]int32
	// learnFreed: a memory step down happened and its effect is not read yet.
	learnFreed bool
	learnTier  int32 // the tier that step moved to
	spec       specState
	prec       precState // per-layer precision controller (precision.go)
	draftMB    float32   // what the draft held when dropped (draft.go)
	kv         kvState   // KV-type controller (kv.go)
}

// maxTrackedTiers bounds the tiers whose memory cost is remembered.
const maxTrackedTiers = 16

// memUsed is the memory reading the controller acts on, in MB: cgroup usage
// when a limit is known, else minus the available memory (only differences
// of it are used).
func memUsed(s *abi.Sensors) int32 {
	if s.Has(abi.PresentCgroupLimit|abi.PresentCgroupUsage) && s.CgroupLimitMB > 0 {
		return s.CgroupUsageMB
	}
	return -s.MemAvailableMB
}

var st state

// reset forgets everything (what a fresh instance starts with).
func reset() { st, ts = state{}, threadState{} }

// Decide is the policy. It changes only what it must and sets the reason of
// the most important change: emergency > thermal > memory (repacked
// weights, tier, then KV type) > throughput > speculation.
func Decide(s *abi.Sensors, d *abi.Decision) {
	var r reason
	threads(s, d, &r)
	if !specRate(s, d, &r) {
		speculation(s, d, &r)
	}
	if !precisionControl(s, d, &r) { // precision.go: with a manifest
		throughput(s, d, &r)
	}
	repack(s, d, &r) // repack.go: before the tier, which it may hold
	draft(s, d, &r)  // draft.go: likewise
	tier(s, d, &r)
	kvType(s, d, &r) // kv.go
	emergency(s, d, &r)
	if r.code != abi.ReasonNone {
		d.SetReasonBytes(r.code, r.text())
	}
}

// tier runs the thermal and memory controllers.
func tier(s *abi.Sensors, d *abi.Decision, r *reason) {
	if !s.Has(abi.PresentCurrent) {
		return // no current state to move from
	}
	nt := int32(1)
	if s.Has(abi.PresentTiers) {
		nt = max(1, s.TiersAvailable)
	}
	cur := s.CurTier
	held := memoryHeld(s)

	// Thermal: each rise to a status ≥ MODERATE costs one tier, at once.
	if s.Has(abi.PresentThermalStatus) {
		th := s.ThermalStatus
		if th >= abi.ThermalModerate && th > st.thermalSeen {
			st.thermalSeen = th
			if cur+1 < nt {
				setTier(s, d, cur+1)
				r.set(abi.ReasonThermal, "thermal ")
				r.add(th.String())
				r.add(": tier ")
				r.tierMove(cur, cur+1)
			}
			return
		}
		if th < abi.ThermalModerate {
			st.thermalSeen = th
		}
	}
	low, ample, known := memoryHeadroom(s)
	if !known {
		return
	}
	// Learn what the last memory step down freed, from the first reading
	// after it (later drops have other causes: the pressure going away).
	if st.learnFreed {
		if up := cur - 1; cur == st.learnTier && up >= 0 && up < maxTrackedTiers {
			st.freed[up] = max(0, st.downUsed[up]-memUsed(s))
		}
		st.learnFreed = false
	}
	if held {
		return
	}
	hot := s.Has(abi.PresentThermalStatus) && s.ThermalStatus >= abi.ThermalModerate
	switch {
	case low && cur+1 < nt:
		setTier(s, d, cur+1)
		if cur < maxTrackedTiers {
			st.downUsed[cur], st.freed[cur], st.learnFreed, st.learnTier = memUsed(s), 0, true, cur+1
		}
		r.set(abi.ReasonMemoryPressure, "memory low: tier ")
		r.tierMove(cur, cur+1)
	case ample && cur > 0 && !hot && !st.emergency && fitsAbove(s, cur-1):
		setTier(s, d, cur-1)
		r.set(abi.ReasonMemoryHeadroom, "memory ok: tier ")
		r.tierMove(cur, cur-1)
	}
}

// fitsAbove reports whether moving up to tier t would leave memory out of the
// low band, charging the move what stepping down from t freed.
func fitsAbove(s *abi.Sensors, t int32) bool {
	if t >= maxTrackedTiers || st.freed[t] <= 0 {
		return true
	}
	after := *s
	after.CgroupUsageMB += st.freed[t]
	after.MemAvailableMB -= st.freed[t]
	low, _, _ := memoryHeadroom(&after)
	return !low
}

func setTier(s *abi.Sensors, d *abi.Decision, t int32) {
	d.Tier = t
	st.lastTierStep = s.Step
	st.tierChanged = true
}

// memoryHeadroom classifies memory: low (go down a tier), ample (may go up),
// or neither; known is false when no usable reading is present.
func memoryHeadroom(s *abi.Sensors) (low, ample, known bool) {
	switch {
	case s.Has(abi.PresentMemAvailable|abi.PresentMemThreshold) && s.MemThresholdMB > 0:
		a, th := float32(s.MemAvailableMB), float32(s.MemThresholdMB)
		low, ample, known = a < LowHeadroom*th, a > HighHeadroom*th, true
	case s.Has(abi.PresentMemAvailable|abi.PresentMemTotal) && s.MemTotalMB > 0:
		a, tot := float32(s.MemAvailableMB), float32(s.MemTotalMB)
		low, ample, known = a < LowFreeOfTotal*tot, a > HighFreeOfTotal*tot, true
	}
	if s.Has(abi.PresentCgroupLimit|abi.PresentCgroupUsage) && s.CgroupLimitMB > 0 {
		u := float32(s.CgroupUsageMB) / float32(s.CgroupLimitMB)
		if !known {
			ample = true
		}
		low = low || u > CgroupHigh
		ample = ample && u < CgroupLow
		known = true
	}
	return low, ample && !low, known
}

// criticalTrim: RUNNING_CRITICAL (15) while running, or COMPLETE (80). UI_HIDDEN
// (20), BACKGROUND (40) and MODERATE (60) describe the app's place in the LRU
// list rather than pressure on a running app; the memory controller handles
// them through the headroom readings.
func criticalTrim(t abi.TrimLevel) bool {
	return (t >= abi.TrimRunningCritical && t < abi.TrimUIHidden) || t >= abi.TrimComplete
}

// emergency shrinks the window under a critical trim level or the low-memory
// flag and restores it after RecoverSteps calm steps.
func emergency(s *abi.Sensors, d *abi.Decision, r *reason) {
	crit := (s.Has(abi.PresentTrimLevel) && criticalTrim(s.TrimLevel)) ||
		(s.Has(abi.PresentLowMemory) && s.LowMemory)
	cur := d.Window
	if s.Has(abi.PresentCurrent) {
		cur = s.CurWindow
	}
	if crit {
		st.calm = 0
		if cur == 0 || cur > EmergencyWindow {
			if !st.emergency {
				st.savedWindow = cur
			}
			st.emergency = true
			d.Window = EmergencyWindow
			r.set(abi.ReasonLowMemory, "")
			if s.LowMemory {
				r.add("low memory")
			} else {
				r.add("trim ")
				r.addInt(int64(s.TrimLevel))
			}
			r.add(": window ")
			r.addWindow(cur)
			r.add("→256")
		}
		return
	}
	if !st.emergency {
		return
	}
	st.calm++
	if st.calm < RecoverSteps {
		return
	}
	st.emergency = false
	if cur == EmergencyWindow && st.savedWindow != EmergencyWindow {
		d.Window = st.savedWindow
		r.set(abi.ReasonMemoryHeadroom, "memory calm: window 256→")
		r.addWindow(st.savedWindow)
	}
}

// speculation moves K by one when the mean acceptance over a full window of
// samples is above AcceptHigh or below AcceptLow, then starts a new window.
// It acts only while speculation is on (current K > 0).
func speculation(s *abi.Sensors, d *abi.Decision, r *reason) {
	if !s.Has(abi.PresentCurrent|abi.PresentAcceptRate) || s.CurSpecK <= 0 {
		st.accN, st.accI = 0, 0
		return
	}
	k := s.CurSpecK
	if k < MinK || k > MaxK { // bring a K from elsewhere into range first
		d.SpecK = min(max(k, MinK), MaxK)
		r.set(abi.ReasonSpeculation, "spec k ")
		r.tierMove(k, d.SpecK)
		return
	}
	st.acc[st.accI] = s.AcceptRate
	st.accI = (st.accI + 1) % AcceptWindow
	st.accN = min(st.accN+1, AcceptWindow)
	if st.accN < AcceptWindow {
		return
	}
	var sum float32
	for _, a := range st.acc {
		sum += a
	}
	mean := sum / AcceptWindow
	nk := k
	switch {
	case mean > AcceptHigh && k < MaxK:
		nk = k + 1
	case mean < AcceptLow && k > MinK:
		nk = k - 1
	default:
		return
	}
	d.SpecK = nk
	st.accN, st.accI = 0, 0
	r.set(abi.ReasonSpeculation, "accept ")
	r.addPct(mean)
	r.add(": spec k ")
	r.tierMove(k, nk)
}
