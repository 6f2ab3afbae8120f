package sensors

import "github.com/edgellm/edgellm/abi"

// Default trip points for zones that publish none, in millidegrees Celsius:
// throttling begins around 85 °C and the system shuts down around 105 °C on
// most SoCs and laptop CPUs.
const (
	DefaultPassiveMC  = 85000
	DefaultCriticalMC = 105000
)

// Plausible range of a zone temperature; readings outside it are sensor
// errors (disconnected thermistors read -273 °C or 0x7fffffff) and ignored.
const (
	minPlausibleMC = -40000
	maxPlausibleMC = 150000
)

// ZoneStatus maps one zone's temperature to Android's 0–6 thermal status
// using its trip points. Linux trip points have no direct PowerManager
// equivalent, so the mapping is a documented heuristic anchored on the two
// points every platform defines, where the kernel starts throttling (the
// lowest passive trip P, else the lowest hot trip, else DefaultPassiveMC)
// and where it shuts down (the lowest critical trip C, else
// DefaultCriticalMC; C is kept above P):
//
//	T ≥ C               SHUTDOWN  (6)
//	T ≥ hot trip, if any, and above P   EMERGENCY (5)
//	T ≥ P + (C−P)/2     CRITICAL  (4)
//	T ≥ P               SEVERE    (3)  the kernel is throttling
//	T ≥ P − 5 °C        MODERATE  (2)
//	T ≥ P − 10 °C       LIGHT     (1)
//	otherwise           NONE      (0)
func ZoneStatus(z *ThermalZone) abi.ThermalStatus {
	p, c, hot := int64(-1), int64(-1), int64(-1)
	for i := 0; i < z.NTrips; i++ {
		t := z.Trips[i]
		switch t.Type {
		case TripPassive:
			if p < 0 || t.TempMC < p {
				p = t.TempMC
			}
		case TripCritical:
			if c < 0 || t.TempMC < c {
				c = t.TempMC
			}
		case TripHot:
			if hot < 0 || t.TempMC < hot {
				hot = t.TempMC
			}
		}
	}
	if p < 0 {
		p = hot
	}
	if p < 0 {
		p = DefaultPassiveMC
	}
	if c < 0 {
		c = DefaultCriticalMC
	}
	if c <= p {
		c = p + 10000
	}
	t := z.TempMC
	switch {
	case t >= c:
		return abi.ThermalShutdown
	case hot > p && t >= hot:
		return abi.ThermalEmergency
	case t >= p+(c-p)/2:
		return abi.ThermalCritical
	case t >= p:
		return abi.ThermalSevere
	case t >= p-5000:
		return abi.ThermalModerate
	case t >= p-10000:
		return abi.ThermalLight
	}
	return abi.ThermalNone
}

// Status is the device thermal status: the highest ZoneStatus over the zones
// that were read with a plausible temperature, and the hottest such zone's
// temperature in millidegrees. ok is false when no zone was read.
func (th *Thermal) Status() (status abi.ThermalStatus, hottestMC int64, ok bool) {
	for i := 0; i < th.N; i++ {
		z := &th.Zones[i]
		if !z.Present || z.TempMC < minPlausibleMC || z.TempMC > maxPlausibleMC {
			continue
		}
		if st := ZoneStatus(z); st > status {
			status = st
		}
		if !ok || z.TempMC > hottestMC {
			hottestMC = z.TempMC
		}
		ok = true
	}
	return status, hottestMC, ok
}
