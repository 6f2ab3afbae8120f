package sensors

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Limits of the fixed-size arrays in a Snapshot (so that a Snapshot is a
// plain value, copied without allocating). Devices with more zones, trip
// points, supplies or cores are truncated to these, lowest index first;
// WithThermalZoneTypes selects the zones that matter on such devices.
const (
	MaxThermalZones = 64
	MaxTripPoints   = 8
	MaxPowerSupply  = 8
	MaxCPUs         = 64
)

// TripType is the kind of a thermal trip point.
type TripType uint8

const (
	TripUnknown  TripType = iota
	TripActive            // a fan or other active cooling turns on
	TripPassive           // the kernel starts throttling (cpufreq, devfreq)
	TripHot               // the platform is told (user space may act)
	TripCritical          // the kernel shuts the system down
)

var tripNames = [...]string{"unknown", "active", "passive", "hot", "critical"}

func (t TripType) String() string {
	if int(t) < len(tripNames) {
		return tripNames[t]
	}
	return "unknown"
}

func parseTripType(s string) TripType {
	for i, n := range tripNames {
		if n == s {
			return TripType(i)
		}
	}
	return TripUnknown
}

// Trip is one trip point of a thermal zone.
type Trip struct {
	Type    TripType
	TempMC  int64 // millidegrees Celsius
	Present bool
}

// ThermalZone is one /sys/class/thermal/thermal_zoneN. Its type and trip
// points are read once when the Reader opens (they are static); Temp on
// every read.
type ThermalZone struct {
	Index   int    // N of thermal_zoneN
	Type    string // e.g. "x86_pkg_temp", "cpu-0-0-usr", "battery", "skin-therm"
	Present bool   // the temperature was read this time
	TempMC  int64  // millidegrees Celsius
	NTrips  int
	Trips   [MaxTripPoints]Trip
}

// Thermal is every thermal zone the Reader watches.
type Thermal struct {
	N     int
	Zones [MaxThermalZones]ThermalZone
}

// thermalFiles are the open temperature files, one per zone.
type thermalFiles struct {
	temp  []kfile
	zones []ThermalZone // static part (index, type, trips)
}

func (t *thermalFiles) close() {
	for i := range t.temp {
		t.temp[i].close()
	}
}

// zoneIndex returns N of "thermal_zoneN", or -1.
func zoneIndex(name, prefix string) int {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok || s == "" {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func readTrim(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// openThermal finds the thermal zones under dir (/sys/class/thermal) whose
// type is accepted by keep (nil keeps all).
func openThermal(dir string, keep func(typ string) bool) thermalFiles {
	var t thermalFiles
	ents, _ := os.ReadDir(dir)
	sort.Slice(ents, func(i, j int) bool {
		return zoneIndex(ents[i].Name(), "thermal_zone") < zoneIndex(ents[j].Name(), "thermal_zone")
	})
	for _, e := range ents {
		idx := zoneIndex(e.Name(), "thermal_zone")
		if idx < 0 || len(t.zones) == MaxThermalZones {
			continue
		}
		zd := filepath.Join(dir, e.Name())
		typ, _ := readTrim(filepath.Join(zd, "type"))
		if keep != nil && !keep(typ) {
			continue
		}
		f := openKFile(filepath.Join(zd, "temp"))
		if !f.ok() {
			continue
		}
		z := ThermalZone{Index: idx, Type: typ}
		for i := 0; z.NTrips < MaxTripPoints && i < 64; i++ {
			ts, ok := readTrim(filepath.Join(zd, "trip_point_"+strconv.Itoa(i)+"_temp"))
			if !ok {
				break
			}
			tt, _ := readTrim(filepath.Join(zd, "trip_point_"+strconv.Itoa(i)+"_type"))
			v, err := strconv.ParseInt(ts, 10, 64)
			if err != nil || v <= 0 {
				continue // disabled trip points read 0 or a negative value
			}
			z.Trips[z.NTrips] = Trip{Type: parseTripType(tt), TempMC: v, Present: true}
			z.NTrips++
		}
		t.temp = append(t.temp, f)
		t.zones = append(t.zones, z)
	}
	return t
}

// read fills th with the current temperatures.
func (t *thermalFiles) read(buf []byte, th *Thermal) {
	th.N = len(t.zones)
	for i := range t.zones {
		z := &th.Zones[i]
		*z = t.zones[i]
		if b, ok := t.temp[i].read(buf); ok {
			z.TempMC, z.Present = parseInt(b)
		}
	}
}
