package sensors

import (
	"time"

	"github.com/edgellm/edgellm/abi"
)

// Snapshot is one reading of every sensor. It is a plain value of fixed size
// (no pointers into the Reader, no slices), so it can be copied, kept and
// compared freely; filling one does not allocate.
type Snapshot struct {
	// Time is when the reading was taken (wall clock with monotonic part).
	Time    time.Time
	Mem     Meminfo
	PSI     PSI
	Cgroup  CgroupMemory
	Smaps   Smaps
	Statm   Statm
	Thermal Thermal
	Power   Power
	CPU     CPUFreqs
	// CPU contention (SourceCPULoad).
	CPUPSI   PSI        // /proc/pressure/cpu
	Runnable Runnable   // /proc/loadavg running/total
	Allowed  CPUAllowed // affinity ∩ cgroup cpuset
	CPUBusy  CPUBusy    // /proc/stat and CPU PSI over the last span
}

// Fill writes the file-based readings of s into dst and sets their presence
// bits. Readings that are absent leave their field and bit untouched, so Fill
// can run over a dst that already holds pushed or engine values; use
// Platform.Apply afterwards for pushed readings that take precedence.
//
// Mapping (MiB = bytes >> 20):
//
//	mem_available_mb  /proc/meminfo MemAvailable (MemFree+Buffers+Cached before 3.14)
//	mem_total_mb      /proc/meminfo MemTotal
//	psi_some_avg10    /proc/pressure/memory some avg10
//	psi_full_avg10    /proc/pressure/memory full avg10
//	cgroup_limit_mb   smallest memory limit of the cgroup and its ancestors (bit clear: none)
//	cgroup_usage_mb   memory.current (v2) or memory.usage_in_bytes (v1)
//	rss_mb            /proc/self/statm resident (else smaps_rollup Rss)
//	pss_mb            /proc/self/smaps_rollup Pss (see WithSmapsInterval)
//	temp_c            the hottest thermal zone
//	thermal_status    derived from the zones' trip points, see ThermalStatus
//	battery_pct       the first power supply of type Battery, capacity
//	charging          a mains/USB supply online, or the battery Charging/Full
//
// mem_threshold_mb, low_memory and trim_level have no kernel-file source:
// only an embedding app can push them (Platform).
func (s *Snapshot) Fill(dst *abi.Sensors) {
	if s.Mem.Present {
		if v, ok := s.Mem.AvailableEstimate(); ok {
			dst.MemAvailableMB = mib(v)
			dst.Present |= abi.PresentMemAvailable
		}
		if s.Mem.Has&MemTotal != 0 {
			dst.MemTotalMB = mib(s.Mem.Total)
			dst.Present |= abi.PresentMemTotal
		}
	}
	if s.PSI.Present {
		if s.PSI.Some.Present {
			dst.PSISomeAvg10 = float32(s.PSI.Some.Avg10)
			dst.Present |= abi.PresentPSISome
		}
		if s.PSI.Full.Present {
			dst.PSIFullAvg10 = float32(s.PSI.Full.Avg10)
			dst.Present |= abi.PresentPSIFull
		}
	}
	if s.Cgroup.Present {
		dst.CgroupUsageMB = mib(s.Cgroup.Usage)
		dst.Present |= abi.PresentCgroupUsage
		if s.Cgroup.Limited {
			dst.CgroupLimitMB = mib(s.Cgroup.Limit)
			dst.Present |= abi.PresentCgroupLimit
		}
	}
	if s.Smaps.Present {
		dst.RSSMB, dst.PSSMB = mib(s.Smaps.Rss), mib(s.Smaps.Pss)
		dst.Present |= abi.PresentRSS | abi.PresentPSS
	}
	if s.Statm.Present { // fresher than a carried-forward smaps_rollup
		dst.RSSMB = mib(s.Statm.Resident)
		dst.Present |= abi.PresentRSS
	}
	if st, tempMC, ok := s.Thermal.Status(); ok {
		dst.ThermalStatus = st
		dst.TempC = float32(tempMC) / 1000
		dst.Present |= abi.PresentThermalStatus | abi.PresentTemp
	}
	if b, ok := s.Power.Battery(); ok && b.HasCapacity {
		dst.BatteryPct = float32(b.Capacity)
		dst.Present |= abi.PresentBattery
	}
	if on, known := s.Power.ExternalPower(); known {
		dst.Charging = on
		dst.Present |= abi.PresentCharging
	}
	s.fillCPULoad(dst)
}

// fillCPULoad writes the CPU contention readings (ABI 1.3 and 1.5):
//
//	cpu_psi_some_avg10  /proc/pressure/cpu some avg10
//	cpu_runnable        /proc/loadavg runnable tasks (the machine's, this process's included)
//	cpu_allowed         CPUs in sched_getaffinity ∩ the cgroup's cpuset.cpus.effective
//	cpu_other_busy      over the last span (≥ MinCPUSpan): /proc/stat busy time of the
//	                    allowed CPUs minus this process's CPU time, ÷ the span (cores)
//	cpu_psi_some_recent /proc/pressure/cpu some total over the span ÷ the span (%)
//	cpu_span_ms         the span
//
// cpu_runnable and cpu_allowed share one presence bit: both are needed to
// compare the run queue with the CPUs available. The 1.5 readings share
// bit 31; without CPU PSI, cpu_psi_some_recent is -1.
func (s *Snapshot) fillCPULoad(dst *abi.Sensors) {
	if s.CPUPSI.Present && s.CPUPSI.Some.Present {
		dst.CPUPSISomeAvg10 = float32(s.CPUPSI.Some.Avg10)
		dst.Present |= abi.PresentCPUPSI
	}
	if s.Runnable.Present && s.Allowed.Present {
		dst.CPURunnable = float32(s.Runnable.Running)
		dst.CPUAllowed = int32(s.Allowed.N)
		dst.Present |= abi.PresentCPULoad
	}
	if c := s.CPUBusy; c.Present {
		dst.CPUOtherBusy = float32(c.OtherBusy)
		dst.CPUPSISomeRecent = -1
		if c.PSIPresent {
			dst.CPUPSISomeRecent = float32(c.PSISomeRecent)
		}
		dst.CPUSpanMS = float32(c.Span.Seconds() * 1000)
		dst.Present |= abi.PresentCPUBusy
	}
}

// mib converts bytes to MiB, clamped to the int32 range of the ABI.
func mib(b int64) int32 {
	m := b >> 20
	switch {
	case m > 1<<31-1:
		return 1<<31 - 1
	case m < 0:
		return 0
	}
	return int32(m)
}
