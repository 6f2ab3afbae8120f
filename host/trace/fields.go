package trace

import "github.com/edgellm/edgellm/abi"

// kind is the JSON type and range of a trace field.
type kind uint8

const (
	kindInt32   kind = iota // integer in int32 range (MiB, tokens)
	kindFloat32             // finite number
	kindBool
	kindTrim    // integer 0–255 (onTrimMemory level)
	kindThermal // integer 0–6 (PowerManager thermal status)
)

// field is one optional trace field: its JSON name (the ABI's), the presence
// bit it sets and where its value lives in abi.Sensors.
type field struct {
	name string
	bit  abi.Presence
	kind kind
	i32  func(*abi.Sensors) *int32
	f32  func(*abi.Sensors) *float32
	b    func(*abi.Sensors) *bool
}

// fields lists the trace fields in output order: the device readings and
// engine telemetry of abi.Sensors that have a presence bit. TestFieldsMatchABI
// checks the names against the ABI's JSON tags.
var fields = [...]field{
	{name: "mem_available_mb", bit: abi.PresentMemAvailable, kind: kindInt32, i32: func(s *abi.Sensors) *int32 { return &s.MemAvailableMB }},
	{name: "mem_threshold_mb", bit: abi.PresentMemThreshold, kind: kindInt32, i32: func(s *abi.Sensors) *int32 { return &s.MemThresholdMB }},
	{name: "mem_total_mb", bit: abi.PresentMemTotal, kind: kindInt32, i32: func(s *abi.Sensors) *int32 { return &s.MemTotalMB }},
	{name: "low_memory", bit: abi.PresentLowMemory, kind: kindBool, b: func(s *abi.Sensors) *bool { return &s.LowMemory }},
	{name: "trim_level", bit: abi.PresentTrimLevel, kind: kindTrim},
	{name: "psi_some_avg10", bit: abi.PresentPSISome, kind: kindFloat32, f32: func(s *abi.Sensors) *float32 { return &s.PSISomeAvg10 }},
	{name: "psi_full_avg10", bit: abi.PresentPSIFull, kind: kindFloat32, f32: func(s *abi.Sensors) *float32 { return &s.PSIFullAvg10 }},
	{name: "cgroup_limit_mb", bit: abi.PresentCgroupLimit, kind: kindInt32, i32: func(s *abi.Sensors) *int32 { return &s.CgroupLimitMB }},
	{name: "cgroup_usage_mb", bit: abi.PresentCgroupUsage, kind: kindInt32, i32: func(s *abi.Sensors) *int32 { return &s.CgroupUsageMB }},
	{name: "rss_mb", bit: abi.PresentRSS, kind: kindInt32, i32: func(s *abi.Sensors) *int32 { return &s.RSSMB }},
	{name: "pss_mb", bit: abi.PresentPSS, kind: kindInt32, i32: func(s *abi.Sensors) *int32 { return &s.PSSMB }},
	{name: "thermal_status", bit: abi.PresentThermalStatus, kind: kindThermal},
	{name: "temp_c", bit: abi.PresentTemp, kind: kindFloat32, f32: func(s *abi.Sensors) *float32 { return &s.TempC }},
	{name: "battery_pct", bit: abi.PresentBattery, kind: kindFloat32, f32: func(s *abi.Sensors) *float32 { return &s.BatteryPct }},
	{name: "charging", bit: abi.PresentCharging, kind: kindBool, b: func(s *abi.Sensors) *bool { return &s.Charging }},
	{name: "tok_per_sec", bit: abi.PresentTokPerSec, kind: kindFloat32, f32: func(s *abi.Sensors) *float32 { return &s.TokPerSec }},
	{name: "tok_per_sec_smoothed", bit: abi.PresentTokPerSecSmoothed, kind: kindFloat32, f32: func(s *abi.Sensors) *float32 { return &s.TokPerSecSmoothed }},
	{name: "accept_rate", bit: abi.PresentAcceptRate, kind: kindFloat32, f32: func(s *abi.Sensors) *float32 { return &s.AcceptRate }},
	{name: "ctx_len", bit: abi.PresentCtxLen, kind: kindInt32, i32: func(s *abi.Sensors) *int32 { return &s.CtxLen }},
	// ABI 1.2 and 1.3 readings with a bit of their own.
	{name: "tok_per_sec_target", bit: abi.PresentTokTarget, kind: kindFloat32, f32: func(s *abi.Sensors) *float32 { return &s.TokPerSecTarget }},
	{name: "cpu_psi_some_avg10", bit: abi.PresentCPUPSI, kind: kindFloat32, f32: func(s *abi.Sensors) *float32 { return &s.CPUPSISomeAvg10 }},
	{name: "step_time_ratio", bit: abi.PresentStepBaseline, kind: kindFloat32, f32: func(s *abi.Sensors) *float32 { return &s.StepTimeRatio }},
}

// FieldMask is every presence bit a trace can carry.
const FieldMask = abi.PresentMemAvailable | abi.PresentMemThreshold | abi.PresentMemTotal | abi.PresentLowMemory |
	abi.PresentTrimLevel | abi.PresentPSISome | abi.PresentPSIFull | abi.PresentCgroupLimit | abi.PresentCgroupUsage |
	abi.PresentRSS | abi.PresentPSS | abi.PresentThermalStatus | abi.PresentTemp | abi.PresentBattery | abi.PresentCharging |
	abi.PresentTokPerSec | abi.PresentTokPerSecSmoothed | abi.PresentAcceptRate | abi.PresentCtxLen |
	abi.PresentTokTarget | abi.PresentCPUPSI | abi.PresentStepBaseline

// FieldNames returns the optional field names in output order (t_ms, always
// first, is not among them).
func FieldNames() []string {
	out := make([]string, len(fields))
	for i := range fields {
		out[i] = fields[i].name
	}
	return out
}

func lookupField(name string) *field {
	for i := range fields {
		if fields[i].name == name {
			return &fields[i]
		}
	}
	return nil
}
