package sensors

import (
	"os"
	"path/filepath"
	"sort"
)

// ChargeStatus is a power supply's "status" attribute.
type ChargeStatus uint8

const (
	StatusUnknown ChargeStatus = iota
	StatusCharging
	StatusDischarging
	StatusNotCharging // plugged in but not charging (e.g. charge limit, too hot)
	StatusFull
)

var statusNames = [...]string{"Unknown", "Charging", "Discharging", "Not charging", "Full"}

func (s ChargeStatus) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "Unknown"
}

func parseStatus(b []byte) ChargeStatus {
	switch string(trimSpace(b)) {
	case "Charging":
		return StatusCharging
	case "Discharging":
		return StatusDischarging
	case "Not charging":
		return StatusNotCharging
	case "Full":
		return StatusFull
	}
	return StatusUnknown
}

// PowerSupply is one /sys/class/power_supply/NAME. Name and Type ("Battery",
// "Mains", "USB", "Wireless"...) are read once; the rest on every read.
type PowerSupply struct {
	Name, Type  string
	HasCapacity bool
	Capacity    int // percent, batteries only
	HasStatus   bool
	Status      ChargeStatus
	HasOnline   bool
	Online      bool // mains/USB: a source is connected
}

// Power is every power supply the Reader watches.
type Power struct {
	N        int
	Supplies [MaxPowerSupply]PowerSupply
}

// Battery returns the first supply of type "Battery", if any.
func (p *Power) Battery() (*PowerSupply, bool) {
	for i := 0; i < p.N; i++ {
		if p.Supplies[i].Type == "Battery" {
			return &p.Supplies[i], true
		}
	}
	return nil, false
}

// ExternalPower reports whether a non-battery supply is online or a battery
// says it is charging or full; known is false when nothing tells.
func (p *Power) ExternalPower() (online, known bool) {
	for i := 0; i < p.N; i++ {
		s := &p.Supplies[i]
		if s.Type != "Battery" && s.HasOnline {
			known = true
			online = online || s.Online
		}
		if s.Type == "Battery" && s.HasStatus && s.Status != StatusUnknown {
			known = true
			online = online || s.Status == StatusCharging || s.Status == StatusFull || s.Status == StatusNotCharging
		}
	}
	return online, known
}

type supplyFiles struct {
	capacity, status, online kfile
}

type powerFiles struct {
	files    []supplyFiles
	supplies []PowerSupply // static part (name, type)
}

func (p *powerFiles) close() {
	for i := range p.files {
		p.files[i].capacity.close()
		p.files[i].status.close()
		p.files[i].online.close()
	}
}

func openPower(dir string) powerFiles {
	var p powerFiles
	ents, _ := os.ReadDir(dir)
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if len(p.files) == MaxPowerSupply {
			break
		}
		sd := filepath.Join(dir, e.Name())
		typ, ok := readTrim(filepath.Join(sd, "type"))
		if !ok {
			continue
		}
		f := supplyFiles{
			capacity: openKFile(filepath.Join(sd, "capacity")),
			status:   openKFile(filepath.Join(sd, "status")),
			online:   openKFile(filepath.Join(sd, "online")),
		}
		p.files = append(p.files, f)
		p.supplies = append(p.supplies, PowerSupply{Name: e.Name(), Type: typ})
	}
	return p
}

func (p *powerFiles) read(buf []byte, pw *Power) {
	pw.N = len(p.files)
	for i := range p.files {
		s := &pw.Supplies[i]
		*s = p.supplies[i]
		f := &p.files[i]
		if b, ok := f.capacity.read(buf); ok {
			if v, ok := parseInt(b); ok && v >= 0 && v <= 100 {
				s.Capacity, s.HasCapacity = int(v), true
			}
		}
		if b, ok := f.status.read(buf); ok {
			s.Status, s.HasStatus = parseStatus(b), true
		}
		if b, ok := f.online.read(buf); ok {
			if v, ok := parseInt(b); ok {
				s.Online, s.HasOnline = v != 0, true
			}
		}
	}
}
