package abi

// ThermalStatus is Android's PowerManager thermal status, 0–6.
type ThermalStatus uint8

// Thermal statuses (android.os.PowerManager.THERMAL_STATUS_*).
const (
	ThermalNone      ThermalStatus = 0
	ThermalLight     ThermalStatus = 1
	ThermalModerate  ThermalStatus = 2
	ThermalSevere    ThermalStatus = 3
	ThermalCritical  ThermalStatus = 4
	ThermalEmergency ThermalStatus = 5
	ThermalShutdown  ThermalStatus = 6
)

func (t ThermalStatus) String() string {
	switch t {
	case ThermalNone:
		return "none"
	case ThermalLight:
		return "light"
	case ThermalModerate:
		return "moderate"
	case ThermalSevere:
		return "severe"
	case ThermalCritical:
		return "critical"
	case ThermalEmergency:
		return "emergency"
	case ThermalShutdown:
		return "shutdown"
	}
	return "invalid"
}

// TrimLevel is the level passed to Android's ComponentCallbacks2.onTrimMemory.
// Zero means no trim callback has been received.
type TrimLevel uint8

// Trim levels (android.content.ComponentCallbacks2.TRIM_MEMORY_*).
const (
	TrimNone            TrimLevel = 0
	TrimRunningModerate TrimLevel = 5
	TrimRunningLow      TrimLevel = 10
	TrimRunningCritical TrimLevel = 15
	TrimUIHidden        TrimLevel = 20
	TrimBackground      TrimLevel = 40
	TrimModerate        TrimLevel = 60
	TrimComplete        TrimLevel = 80
)

// KVType is the element type of the KV cache on the wire. Zero is "unknown":
// a Decision carrying it leaves the KV type unchanged. The host's KV type is
// host/engine's (a name); engine.KVType.ABI and engine.KVTypeFromABI convert.
type KVType uint8

// KV cache types.
const (
	KVUnknown KVType = 0
	KVF16     KVType = 1
	KVF32     KVType = 2
	KVQ8_0    KVType = 3 // INT8, group 32: 8.5 bits per value
	KVQ4_0    KVType = 4 // INT4, group 32: 4.5 bits per value
)

// String returns the name of the type ("f16", "f32", "q8_0", "q4_0"),
// or "" for KVUnknown and invalid values.
func (k KVType) String() string {
	switch k {
	case KVF16:
		return "f16"
	case KVF32:
		return "f32"
	case KVQ8_0:
		return "q8_0"
	case KVQ4_0:
		return "q4_0"
	}
	return ""
}

// Reason says why a policy changed the decision. Codes below ReasonPolicy are
// defined here; a policy may use ReasonPolicy and above for its own codes.
type Reason uint16

// Reason codes.
const (
	ReasonNone           Reason = 0  // no change, or the decision was left as pre-filled
	ReasonThermal        Reason = 1  // thermal status or temperature
	ReasonMemoryPressure Reason = 2  // memory headroom low: lower precision / smaller window
	ReasonMemoryHeadroom Reason = 3  // memory headroom recovered: higher precision
	ReasonLowMemory      Reason = 4  // emergency: low-memory flag or critical trim level
	ReasonSpeculation    Reason = 5  // speculation K adapted to acceptance
	ReasonThroughput     Reason = 6  // throughput controller changed per-layer precision
	ReasonFixed          Reason = 7  // a fixed (static) decision
	ReasonBattery        Reason = 8  // battery level or charging state
	ReasonGuestPanic     Reason = 99 // set by policy-sdk with StatusPanic; text holds the panic message
	ReasonPolicy         Reason = 1000
)

// Status is the i32 returned by the guest's decide export.
type Status int32

// Status codes. Any other value is treated by the host like StatusPanic.
const (
	// StatusOK: the Decision at out_ptr is valid.
	StatusOK Status = 0
	// StatusBadSensors: the guest could not decode the Sensors at in_ptr
	// (short, another major, bad size). The host's bug; the Decision is unspecified.
	StatusBadSensors Status = 1
	// StatusBadDecision: the guest could not decode the pre-filled Decision.
	StatusBadDecision Status = 2
	// StatusPanic: the policy panicked; the Decision is unspecified except its
	// reason (ReasonGuestPanic and the start of the panic message). The host
	// discards the instance: package state may be half-updated.
	StatusPanic Status = 3
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusBadSensors:
		return "bad sensors"
	case StatusBadDecision:
		return "bad decision"
	case StatusPanic:
		return "guest panic"
	}
	return "unknown status"
}

// Names of the guest exports (see ABI.md, "Exports").
const (
	ExportMemory       = "memory"
	ExportVersionMajor = "edgellm_abi_version_major"
	ExportVersionMinor = "edgellm_abi_version_minor"
	ExportInPtr        = "in_ptr"
	ExportOutPtr       = "out_ptr"
	ExportDecide       = "decide"
	// ExportInitialize is the WASI reactor initializer (Go c-shared guests);
	// the host calls it once, if exported, before any other export.
	ExportInitialize = "_initialize"
)
