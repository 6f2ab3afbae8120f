package trace

import "github.com/edgellm/edgellm/abi"

// Record is one line of a trace: the readings at one instant. Only the
// fields whose bit is set in Present were in the line; the others in Values
// are zero and mean nothing.
type Record struct {
	// TMs is the time of the record in milliseconds since the trace began.
	TMs int64
	// Present says which fields of Values the record carries (a subset of
	// FieldMask).
	Present abi.Presence
	// Values holds the carried fields.
	Values abi.Sensors
	// Line is the 1-based line the record was read from (0 if built in code).
	Line int
}

// Apply overlays the record onto s: every present field is copied and its
// bit set, the others are left as they are, and s.TimeNS becomes TMs × 1e6.
// It does not allocate.
func (r *Record) Apply(s *abi.Sensors) {
	s.TimeNS = r.TMs * 1e6
	p := r.Present & FieldMask
	if p == 0 {
		return
	}
	v := &r.Values
	if p&abi.PresentMemAvailable != 0 {
		s.MemAvailableMB = v.MemAvailableMB
	}
	if p&abi.PresentMemThreshold != 0 {
		s.MemThresholdMB = v.MemThresholdMB
	}
	if p&abi.PresentMemTotal != 0 {
		s.MemTotalMB = v.MemTotalMB
	}
	if p&abi.PresentLowMemory != 0 {
		s.LowMemory = v.LowMemory
	}
	if p&abi.PresentTrimLevel != 0 {
		s.TrimLevel = v.TrimLevel
	}
	if p&abi.PresentPSISome != 0 {
		s.PSISomeAvg10 = v.PSISomeAvg10
	}
	if p&abi.PresentPSIFull != 0 {
		s.PSIFullAvg10 = v.PSIFullAvg10
	}
	if p&abi.PresentCgroupLimit != 0 {
		s.CgroupLimitMB = v.CgroupLimitMB
	}
	if p&abi.PresentCgroupUsage != 0 {
		s.CgroupUsageMB = v.CgroupUsageMB
	}
	if p&abi.PresentRSS != 0 {
		s.RSSMB = v.RSSMB
	}
	if p&abi.PresentPSS != 0 {
		s.PSSMB = v.PSSMB
	}
	if p&abi.PresentThermalStatus != 0 {
		s.ThermalStatus = v.ThermalStatus
	}
	if p&abi.PresentTemp != 0 {
		s.TempC = v.TempC
	}
	if p&abi.PresentBattery != 0 {
		s.BatteryPct = v.BatteryPct
	}
	if p&abi.PresentCharging != 0 {
		s.Charging = v.Charging
	}
	if p&abi.PresentTokPerSec != 0 {
		s.TokPerSec = v.TokPerSec
	}
	if p&abi.PresentTokPerSecSmoothed != 0 {
		s.TokPerSecSmoothed = v.TokPerSecSmoothed
	}
	if p&abi.PresentAcceptRate != 0 {
		s.AcceptRate = v.AcceptRate
	}
	if p&abi.PresentCtxLen != 0 {
		s.CtxLen = v.CtxLen
	}
	s.Present |= p
}

// FromSensors makes a record at tMs carrying the fields of s whose bits are
// in mask (and set in s.Present).
func FromSensors(tMs int64, s *abi.Sensors, mask abi.Presence) Record {
	r := Record{TMs: tMs}
	tmp := *s
	tmp.Present &= mask & FieldMask
	r.Present = tmp.Present
	r.Values = tmp
	r.Values.Present = 0
	r.Values.TimeNS = 0
	return r
}

// Replayer plays a trace back as accumulated state: each record overlays the
// previous ones, so a field carried once keeps its value until a later
// record changes it.
type Replayer struct {
	recs  []Record
	next  int
	state abi.Sensors
}

// NewReplayer replays recs, which must be in non-decreasing TMs order (as
// Read returns them). It does not copy recs.
func NewReplayer(recs []Record) *Replayer { return &Replayer{recs: recs} }

// Len is the number of records.
func (p *Replayer) Len() int { return len(p.recs) }

// Duration is the TMs of the last record (0 for an empty trace).
func (p *Replayer) Duration() int64 {
	if len(p.recs) == 0 {
		return 0
	}
	return p.recs[len(p.recs)-1].TMs
}

// Next applies the next record and returns the accumulated state; ok is
// false at the end of the trace.
func (p *Replayer) Next() (s *abi.Sensors, ok bool) {
	if p.next >= len(p.recs) {
		return &p.state, false
	}
	p.recs[p.next].Apply(&p.state)
	p.next++
	return &p.state, true
}

// At advances to time tMs — applying every record with TMs ≤ tMs — and
// returns the accumulated state with TimeNS = tMs × 1e6. Time only moves
// forward: an earlier tMs applies nothing new (use Reset to rewind).
func (p *Replayer) At(tMs int64) *abi.Sensors {
	for p.next < len(p.recs) && p.recs[p.next].TMs <= tMs {
		p.recs[p.next].Apply(&p.state)
		p.next++
	}
	p.state.TimeNS = tMs * 1e6
	return &p.state
}

// Fill overlays the accumulated state at tMs onto dst: the trace's fields
// and bits replace dst's, other fields (engine state) are kept.
func (p *Replayer) Fill(tMs int64, dst *abi.Sensors) {
	st := p.At(tMs)
	r := Record{TMs: tMs, Present: st.Present & FieldMask, Values: *st}
	r.Apply(dst)
}

// Reset rewinds to before the first record.
func (p *Replayer) Reset() {
	p.next = 0
	p.state = abi.Sensors{}
}
