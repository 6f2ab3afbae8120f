package abi

import "strconv"

// Field describes one field of an encoded struct: the single source of the
// offset tables in ABI.md (rendered by LayoutMarkdown) and of the layout test.
type Field struct {
	Name     string   // wire name, snake_case (also the trace JSON name where one exists)
	GoName   string   // field of the Go struct ("" for header and padding)
	Offset   int      // byte offset from the struct start
	Type     string   // C-style type: u8, u16, u32, i32, i64, u64, f32, u8[128], f32[128]
	Size     int      // bytes
	Since    Version  // ABI version that added the field
	Presence Presence // Sensors only: the bit that says the reading is valid (0: always)
	Doc      string   // one line, with the unit
}

// The versions fields were added in (unexported, never written).
var (
	v10 = Version{Major: 1, Minor: 0}
	v11 = Version{Major: 1, Minor: 1}
	v12 = Version{Major: 1, Minor: 2}
	v13 = Version{Major: 1, Minor: 3}
	v14 = Version{Major: 1, Minor: 4}
	v15 = Version{Major: 1, Minor: 5}
	v16 = Version{Major: 1, Minor: 6}
	v17 = Version{Major: 1, Minor: 7}
)

// SensorsLayout returns the Sensors fields in offset order (a fresh slice).
func SensorsLayout() []Field {
	return []Field{
		{"version_major", "", offSMajor, "u16", 2, v10, 0, "ABI major of the writer (1)"},
		{"version_minor", "", offSMinor, "u16", 2, v10, 0, "ABI minor of the writer"},
		{"size", "", offSSize, "u32", 4, v10, 0, "bytes written, header included (≥ 768 for 1.x)"},
		{"present", "Present", offSPresent, "u64", 8, v10, 0, "presence bitmask (Present* bits)"},
		{"step", "Step", offSStep, "u64", 8, v10, 0, "decode step index"},
		{"t_ns", "TimeNS", offSTimeNS, "i64", 8, v10, 0, "monotonic time, ns (traces: t_ms × 1e6)"},
		{"mem_available_mb", "MemAvailableMB", offSMemAvailable, "i32", 4, v10, PresentMemAvailable, "available memory, MiB"},
		{"mem_threshold_mb", "MemThresholdMB", offSMemThreshold, "i32", 4, v10, PresentMemThreshold, "low-memory threshold, MiB"},
		{"mem_total_mb", "MemTotalMB", offSMemTotal, "i32", 4, v10, PresentMemTotal, "total memory, MiB"},
		{"low_memory", "LowMemory", offSLowMemory, "u8", 1, v10, PresentLowMemory, "low-memory flag, 0/1"},
		{"trim_level", "TrimLevel", offSTrimLevel, "u8", 1, v10, PresentTrimLevel, "onTrimMemory level (0,5,10,15,20,40,60,80)"},
		{"thermal_status", "ThermalStatus", offSThermalStatus, "u8", 1, v10, PresentThermalStatus, "PowerManager thermal status 0–6"},
		{"charging", "Charging", offSCharging, "u8", 1, v10, PresentCharging, "charging, 0/1"},
		{"psi_some_avg10", "PSISomeAvg10", offSPSISome, "f32", 4, v10, PresentPSISome, "memory PSI some avg10, %"},
		{"psi_full_avg10", "PSIFullAvg10", offSPSIFull, "f32", 4, v10, PresentPSIFull, "memory PSI full avg10, %"},
		{"cgroup_limit_mb", "CgroupLimitMB", offSCgroupLimit, "i32", 4, v10, PresentCgroupLimit, "memory cgroup limit, MiB"},
		{"cgroup_usage_mb", "CgroupUsageMB", offSCgroupUsage, "i32", 4, v10, PresentCgroupUsage, "memory cgroup usage, MiB"},
		{"rss_mb", "RSSMB", offSRSS, "i32", 4, v10, PresentRSS, "process RSS, MiB"},
		{"pss_mb", "PSSMB", offSPSS, "i32", 4, v10, PresentPSS, "process PSS, MiB"},
		{"temp_c", "TempC", offSTempC, "f32", 4, v10, PresentTemp, "temperature, °C"},
		{"battery_pct", "BatteryPct", offSBatteryPct, "f32", 4, v10, PresentBattery, "battery level, %"},
		{"tok_per_sec", "TokPerSec", offSTokPerSec, "f32", 4, v10, PresentTokPerSec, "throughput of the last step, tokens/s"},
		{"tok_per_sec_smoothed", "TokPerSecSmoothed", offSTokPerSecSmoot, "f32", 4, v10, PresentTokPerSecSmoothed, "smoothed throughput, tokens/s"},
		{"accept_rate", "AcceptRate", offSAcceptRate, "f32", 4, v10, PresentAcceptRate, "smoothed speculative acceptance, 0–1"},
		{"ctx_len", "CtxLen", offSCtxLen, "i32", 4, v10, PresentCtxLen, "tokens in the context"},
		{"tiers_available", "TiersAvailable", offSTiers, "i32", 4, v10, PresentTiers, "number of tiers (tier 0 = highest precision)"},
		{"layer_count", "LayerCount", offSLayerCount, "i32", 4, v10, PresentLayerLatency, "number of model layers"},
		{"cur_tier", "CurTier", offSCurTier, "i32", 4, v10, PresentCurrent, "current tier index"},
		{"cur_spec_k", "CurSpecK", offSCurSpecK, "i32", 4, v10, PresentCurrent, "current speculation K (0 = off)"},
		{"cur_window", "CurWindow", offSCurWindow, "i32", 4, v10, PresentCurrent, "current KV window, tokens (0 = full)"},
		{"cur_anchors", "CurAnchors", offSCurAnchors, "i32", 4, v10, PresentCurrent, "current anchor tokens"},
		{"cur_kv_type", "CurKVType", offSCurKVType, "u8", 1, v10, PresentCurrent, "current KV type (KV* codes)"},
		{"reserved", "", offSReserved, "u8[7]", 7, v10, 0, "zero"},
		{"layer_latency_us", "LayerLatencyUS", offSLayerLatency, "f32[128]", 4 * MaxLayers, v10, PresentLayerLatency, "per-layer decode latency, µs"},
		{"cur_layer_bits", "CurLayerBits", offSCurLayerBits, "u8[128]", MaxLayers, v10, PresentCurrent, "current per-layer precision, bits"},
		{"spec_accept_by_pos", "SpecAcceptByPos", offSSpecAcceptByPos, "f32[8]", 4 * MaxSpecK, v11, PresentSpecAccept, "smoothed acceptance at draft position i, 0–1"},
		{"spec_mean_accepted", "SpecMeanAccepted", offSSpecMeanAccepted, "f32", 4, v11, PresentSpecAccept, "smoothed mean accepted draft tokens per round"},
		{"spec_draft_cost", "SpecDraftCost", offSSpecDraftCost, "f32", 4, v11, PresentSpecCost, "draft step time ÷ plain target step time"},
		{"spec_verify_cost", "SpecVerifyCost", offSSpecVerifyCost, "f32[9]", 4 * (MaxSpecK + 1), v11, PresentSpecCost, "target batch of i+1 tokens ÷ plain target step: v(n)"},
		{"spec_k_max", "SpecKMax", offSSpecKMax, "i32", 4, v11, PresentSpecKMax, "largest K the engine accepts now (0 = no draft)"},
		{"layer_min_bits", "LayerMinBits", offSLayerMinBits, "u8[128]", MaxLayers, v12, PresentManifest, "lowest precision each layer tolerates, bits"},
		{"layer_max_bits", "LayerMaxBits", offSLayerMaxBits, "u8[128]", MaxLayers, v12, PresentManifest, "highest precision available per layer, bits"},
		{"layer_sens_rank", "LayerSensRank", offSLayerSensRank, "u8[128]", MaxLayers, v12, PresentManifest, "sensitivity rank, 0 = most sensitive"},
		{"tok_per_sec_target", "TokPerSecTarget", offSTokPerSecTarget, "f32", 4, v12, PresentTokTarget, "throughput target set by the app, tokens/s"},
		{"cpu_psi_some_avg10", "CPUPSISomeAvg10", offSCPUPSISome, "f32", 4, v13, PresentCPUPSI, "CPU PSI some avg10, %"},
		{"cpu_runnable", "CPURunnable", offSCPURunnable, "f32", 4, v13, PresentCPULoad, "runnable tasks on the machine (procs_running)"},
		{"cpu_allowed", "CPUAllowed", offSCPUAllowed, "i32", 4, v13, PresentCPULoad, "CPUs this process may run on"},
		{"step_time_ratio", "StepTimeRatio", offSStepTimeRatio, "f32", 4, v13, PresentStepBaseline, "decode step time ÷ quiet baseline, same threads"},
		{"cur_threads", "CurThreads", offSCurThreads, "i32", 4, v13, PresentCurrent, "current decode threads"},
		{"repack_layers", "RepackLayers", offSRepackLayers, "i32", 4, v14, PresentRepack, "layers whose repacked weights are in use; the output head counts as one more (layer n_layer)"},
		{"repack_layers_max", "RepackLayersMax", offSRepackLayersMax, "i32", 4, v14, PresentRepack, "layers that can be repacked (0 = the model was loaded without repacking)"},
		{"repack_mb", "RepackMB", offSRepackMB, "i32", 4, v14, PresentRepack, "anonymous memory of the repacked weights in use, MiB"},
		{"repack_mb_max", "RepackMBMax", offSRepackMBMax, "i32", 4, v14, PresentRepack, "the same with every layer repacked, MiB"},
		{"cpu_other_busy", "CPUOtherBusy", offSCPUOtherBusy, "f32", 4, v15, PresentCPUBusy, "CPU time of other processes on the CPUs this process may use ÷ the span, cores"},
		{"cpu_psi_some_recent", "CPUPSISomeRecent", offSCPUPSISomeRecent, "f32", 4, v15, PresentCPUBusy, "CPU PSI some over the span, % (−1: the kernel has no CPU PSI)"},
		{"cpu_span_ms", "CPUSpanMS", offSCPUSpanMS, "f32", 4, v15, PresentCPUBusy, "the span both were measured over, ms"},
		{"layer_latency_batch", "LayerLatencyBatch", offSLayerLatencyBatch, "i32", 4, v16, PresentLatencyShape, "tokens in the forward pass layer_latency_us was measured on (1 plain step, K+1 verify, n prefill)"},
		{"layer_latency_pos", "LayerLatencyPos", offSLayerLatencyPos, "i32", 4, v16, PresentLatencyShape, "KV position (context tokens) at that pass"},
		{"draft_state", "DraftState", offSDraftState, "i32", 4, v16, PresentDraft, "draft model: 0 none configured, 1 attached, 2 detached"},
		{"draft_mb", "DraftMB", offSDraftMB, "f32", 4, v16, PresentDraft, "memory the draft holds now (resident weights + KV), MiB"},
		{"kv_evict", "KVEvict", offSKVEvict, "i32", 4, v17, PresentEvict, "KV window eviction mode in force: 1 drop, 2 merge"},
	}
}

// DecisionLayout returns the Decision fields in offset order (a fresh slice).
func DecisionLayout() []Field {
	return []Field{
		{"version_major", "", offDMajor, "u16", 2, v10, 0, "ABI major of the writer (1)"},
		{"version_minor", "", offDMinor, "u16", 2, v10, 0, "ABI minor of the writer"},
		{"size", "", offDSize, "u32", 4, v10, 0, "bytes written, header included (≥ 736 for 1.x)"},
		{"tier", "Tier", offDTier, "i32", 4, v10, 0, "tier index (0 = highest precision)"},
		{"spec_k", "SpecK", offDSpecK, "i32", 4, v10, 0, "speculation K (0 = off)"},
		{"window", "Window", offDWindow, "i32", 4, v10, 0, "KV window, tokens (0 = full context)"},
		{"anchors", "Anchors", offDAnchors, "i32", 4, v10, 0, "anchor (sink) tokens"},
		{"threads", "Threads", offDThreads, "i32", 4, v10, 0, "decode threads (0 = host default)"},
		{"cadence_steps", "CadenceSteps", offDCadence, "i32", 4, v10, 0, "call again after N steps (0, 1 = every step)"},
		{"kv_type", "KVType", offDKVType, "u8", 1, v10, 0, "KV type (0 = leave as is)"},
		{"reason_len", "ReasonLen", offDReasonLen, "u8", 1, v10, 0, "valid bytes of reason_text (≤ 48)"},
		{"reason_code", "ReasonCode", offDReasonCode, "u16", 2, v10, 0, "Reason* code"},
		{"reason_text", "ReasonText", offDReasonText, "u8[48]", ReasonTextSize, v10, 0, "UTF-8 reason, zero-padded"},
		{"reserved", "", offDReserved, "u8[12]", 12, v10, 0, "zero"},
		{"layer_bits", "LayerBits", offDLayerBits, "u8[128]", MaxLayers, v10, 0, "per-layer precision, bits (0 = leave as is)"},
		{"layer_window_scale", "LayerWindowScale", offDWindowScale, "f32[128]", 4 * MaxLayers, v10, 0, "per-layer window scale in (0, 1] (0 = leave as is)"},
		{"spec_p_min", "SpecPMin", offDSpecPMin, "f32", 4, v11, 0, "stop drafting when the draft's top p < p_min, [0, 1] (0 = leave as is)"},
		{"draft_threads", "DraftThreads", offDDraftThreads, "i32", 4, v11, 0, "draft-step threads (0 = leave as is)"},
		{"draft_cpu_mask", "DraftCPUMask", offDDraftCPUMask, "u64", 8, v11, 0, "draft-step CPUs, bit i = CPU i (0 = leave as is)"},
		{"verify_cpu_mask", "VerifyCPUMask", offDVerifyCPUMask, "u64", 8, v11, 0, "target-step CPUs, bit i = CPU i (0 = leave as is)"},
		{"repack_layers", "RepackLayers", offDRepackLayers, "i32", 4, v14, 0, "layers to keep repacked, from layer 0 up, the output head last (n_layer + 1 = all); negative = leave as is"},
		{"reserved2", "", offDReserved2, "u8[4]", 4, v14, 0, "zero"},
		{"draft", "Draft", offDDraft, "i32", 4, v16, 0, "draft model: 0 leave as is, 1 attach, 2 detach and free its memory"},
		{"kv_evict", "KVEvict", offDKVEvict, "i32", 4, v17, 0, "KV window eviction: 0 leave as is, 1 drop, 2 merge into the next visible position"},
	}
}

// PresenceOf returns the presence bit of the Sensors reading with the given
// JSON (trace) name, and false for names without one (unknown names, and
// step, t_ms and t_ns, which are always present). A trace reader sets this
// bit for every field a record carries.
func PresenceOf(jsonName string) (Presence, bool) {
	if jsonName == "t_ms" {
		return 0, false
	}
	for _, f := range SensorsLayout() {
		if f.Name == jsonName && f.Presence != 0 {
			return f.Presence, true
		}
	}
	return 0, false
}

// LayoutMarkdown renders a layout as the Markdown table embedded in ABI.md.
func LayoutMarkdown(fields []Field) string {
	s := "| offset | size | type | name | Go field | presence bit | since | meaning |\n" +
		"|---:|---:|---|---|---|---|---|---|\n"
	for _, f := range fields {
		bit := ""
		if f.Presence != 0 {
			bit = presenceName(f.Presence)
		}
		s += "| " + strconv.Itoa(f.Offset) + " | " + strconv.Itoa(f.Size) + " | " + f.Type +
			" | `" + f.Name + "` | " + f.GoName + " | " + bit + " | " + f.Since.String() +
			" | " + f.Doc + " |\n"
	}
	return s
}

func presenceName(p Presence) string {
	names := [...]string{
		"MemAvailable", "MemThreshold", "MemTotal", "LowMemory", "TrimLevel",
		"PSISome", "PSIFull", "CgroupLimit", "CgroupUsage", "RSS", "PSS",
		"ThermalStatus", "Temp", "Battery", "Charging", "TokPerSec",
		"TokPerSecSmoothed", "AcceptRate", "CtxLen", "LayerLatency", "Tiers", "Current",
		"SpecAccept", "SpecCost", "SpecKMax", "Manifest", "TokTarget", "CPUPSI", "CPULoad", "StepBaseline",
		"Repack", "CPUBusy", "LatencyShape", "Draft", "Evict",
	}
	for i, n := range names {
		if p == 1<<i {
			return "Present" + n + " (bit " + strconv.Itoa(i) + ")"
		}
	}
	return "0x" + strconv.FormatUint(uint64(p), 16)
}
