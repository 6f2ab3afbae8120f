package sensors

import (
	"fmt"
	"sync"
	"time"

	"github.com/edgellm/edgellm/abi"
)

// Staleness says how long a pushed reading stays valid after its push. Past
// that, Apply ignores it and the file-based reading (if any) shows through.
// Zero means the reading never goes stale.
type Staleness struct {
	MemoryInfo    time.Duration
	TrimLevel     time.Duration
	ThermalStatus time.Duration
	Battery       time.Duration
}

// DefaultStaleness fits how Android delivers each reading:
//
//   - MemoryInfo is polled by the app (ActivityManager.getMemoryInfo), so a
//     value not refreshed for 5 s is assumed stale: the app stopped polling.
//   - onTrimMemory is an event with no "pressure is over" counterpart, so a
//     trim level expires 30 s after the last callback.
//   - Thermal status (OnThermalStatusChangedListener) and battery
//     (ACTION_BATTERY_CHANGED) are delivered on every change, so they never
//     go stale: the app must push each change.
var DefaultStaleness = Staleness{MemoryInfo: 5 * time.Second, TrimLevel: 30 * time.Second}

// Platform holds readings an embedding app pushes from its platform's own
// APIs. Pushed readings take precedence over the kernel files (the platform
// knows better: Android's threshold and lowMemory come from the low-memory
// killer's configuration, and its thermal status from the vendor thermal
// HAL), until they go stale (Staleness).
//
// Platform is safe for concurrent use: the app pushes from its own threads
// while the decode loop calls Apply. Neither pushes nor Apply allocate.
type Platform struct {
	stale Staleness
	now   func() time.Time // injectable for tests

	mu      sync.Mutex
	mem     pushed[memInfo]
	trim    pushed[abi.TrimLevel]
	thermal pushed[abi.ThermalStatus]
	battery pushed[battery]
}

type pushed[T any] struct {
	set bool
	at  time.Time
	v   T
}

func (p *pushed[T]) fresh(now time.Time, maxAge time.Duration) bool {
	return p.set && (maxAge <= 0 || now.Sub(p.at) <= maxAge)
}

type memInfo struct {
	availMB, thresholdMB, totalMB int32
	low                           bool
}

type battery struct {
	pct      float32
	charging bool
}

// NewPlatform returns an empty Platform (nothing pushed yet).
func NewPlatform(st Staleness) *Platform { return &Platform{stale: st, now: time.Now} }

// PushError reports a pushed value out of range. The previous value is kept.
type PushError struct {
	Field string // ABI field name
	Value float64
	Range string
}

func (e *PushError) Error() string {
	return fmt.Sprintf("sensors: pushed %s = %v out of range %s", e.Field, e.Value, e.Range)
}

// PushMemoryInfo records ActivityManager.MemoryInfo: availMem, threshold and
// totalMem in bytes, as Android reports them, and lowMemory.
func (p *Platform) PushMemoryInfo(availMem, threshold, totalMem int64, lowMemory bool) error {
	switch {
	case availMem < 0:
		return &PushError{"mem_available_mb", float64(availMem), "[0, ∞) bytes"}
	case threshold < 0:
		return &PushError{"mem_threshold_mb", float64(threshold), "[0, ∞) bytes"}
	case totalMem < 0:
		return &PushError{"mem_total_mb", float64(totalMem), "[0, ∞) bytes"}
	}
	now := p.now()
	p.mu.Lock()
	p.mem = pushed[memInfo]{true, now, memInfo{mib(availMem), mib(threshold), mib(totalMem), lowMemory}}
	p.mu.Unlock()
	return nil
}

// PushTrimLevel records the level of ComponentCallbacks2.onTrimMemory
// (5, 10, 15, 20, 40, 60, 80; any value 0–255 is passed on as is).
func (p *Platform) PushTrimLevel(level int) error {
	if level < 0 || level > 255 {
		return &PushError{"trim_level", float64(level), "[0, 255]"}
	}
	now := p.now()
	p.mu.Lock()
	p.trim = pushed[abi.TrimLevel]{true, now, abi.TrimLevel(level)}
	p.mu.Unlock()
	return nil
}

// PushThermalStatus records PowerManager.getCurrentThermalStatus() or the
// value passed to OnThermalStatusChangedListener, 0 (NONE) to 6 (SHUTDOWN).
func (p *Platform) PushThermalStatus(status int) error {
	if status < int(abi.ThermalNone) || status > int(abi.ThermalShutdown) {
		return &PushError{"thermal_status", float64(status), "[0, 6]"}
	}
	now := p.now()
	p.mu.Lock()
	p.thermal = pushed[abi.ThermalStatus]{true, now, abi.ThermalStatus(status)}
	p.mu.Unlock()
	return nil
}

// PushBattery records the battery level in percent (BatteryManager
// EXTRA_LEVEL × 100 / EXTRA_SCALE, or BATTERY_PROPERTY_CAPACITY) and whether
// the device is plugged in (EXTRA_PLUGGED ≠ 0).
func (p *Platform) PushBattery(pct float64, charging bool) error {
	if !(pct >= 0 && pct <= 100) {
		return &PushError{"battery_pct", pct, "[0, 100]"}
	}
	now := p.now()
	p.mu.Lock()
	p.battery = pushed[battery]{true, now, battery{float32(pct), charging}}
	p.mu.Unlock()
	return nil
}

// Reset forgets every pushed reading.
func (p *Platform) Reset() {
	p.mu.Lock()
	p.mem, p.trim, p.thermal, p.battery = pushed[memInfo]{}, pushed[abi.TrimLevel]{}, pushed[abi.ThermalStatus]{}, pushed[battery]{}
	p.mu.Unlock()
}

// Apply overlays the pushed readings that are fresh at now onto dst and sets
// their presence bits. Readings never pushed or stale leave dst untouched.
// A nil Platform applies nothing.
func (p *Platform) Apply(dst *abi.Sensors, now time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mem.fresh(now, p.stale.MemoryInfo) {
		m := p.mem.v
		dst.MemAvailableMB, dst.MemThresholdMB, dst.MemTotalMB, dst.LowMemory = m.availMB, m.thresholdMB, m.totalMB, m.low
		dst.Present |= abi.PresentMemAvailable | abi.PresentMemThreshold | abi.PresentMemTotal | abi.PresentLowMemory
	}
	if p.trim.fresh(now, p.stale.TrimLevel) {
		dst.TrimLevel = p.trim.v
		dst.Present |= abi.PresentTrimLevel
	}
	if p.thermal.fresh(now, p.stale.ThermalStatus) {
		dst.ThermalStatus = p.thermal.v
		dst.Present |= abi.PresentThermalStatus
	}
	if p.battery.fresh(now, p.stale.Battery) {
		dst.BatteryPct, dst.Charging = p.battery.v.pct, p.battery.v.charging
		dst.Present |= abi.PresentBattery | abi.PresentCharging
	}
}
