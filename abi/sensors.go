package abi

// Presence is the bitmask in Sensors.Present saying which readings the host
// filled. A reading whose bit is clear is unspecified (hosts write zero);
// policies must check the bit before using it. Step and TimeNS are always
// present and have no bit.
type Presence uint64

// Presence bits. Bits 0–21 are 1.0's, 22–24 1.1's, 25–26 1.2's, 27–29 1.3's,
// 30 1.4's, 31 1.5's; bits 32–63 are free for later minors.
const (
	PresentMemAvailable      Presence = 1 << 0
	PresentMemThreshold      Presence = 1 << 1
	PresentMemTotal          Presence = 1 << 2
	PresentLowMemory         Presence = 1 << 3
	PresentTrimLevel         Presence = 1 << 4
	PresentPSISome           Presence = 1 << 5
	PresentPSIFull           Presence = 1 << 6
	PresentCgroupLimit       Presence = 1 << 7
	PresentCgroupUsage       Presence = 1 << 8
	PresentRSS               Presence = 1 << 9
	PresentPSS               Presence = 1 << 10
	PresentThermalStatus     Presence = 1 << 11
	PresentTemp              Presence = 1 << 12
	PresentBattery           Presence = 1 << 13
	PresentCharging          Presence = 1 << 14
	PresentTokPerSec         Presence = 1 << 15
	PresentTokPerSecSmoothed Presence = 1 << 16
	PresentAcceptRate        Presence = 1 << 17
	PresentCtxLen            Presence = 1 << 18
	PresentLayerLatency      Presence = 1 << 19 // LayerCount and LayerLatencyUS
	PresentTiers             Presence = 1 << 20 // TiersAvailable
	PresentCurrent           Presence = 1 << 21 // the Cur* fields (current engine state)

	// 1.1: speculative decoding.
	PresentSpecAccept Presence = 1 << 22 // SpecAcceptByPos and SpecMeanAccepted
	PresentSpecCost   Presence = 1 << 23 // SpecDraftCost and SpecVerifyCost
	PresentSpecKMax   Presence = 1 << 24 // SpecKMax

	// 1.2: per-layer precision.
	PresentManifest  Presence = 1 << 25 // LayerMinBits, LayerMaxBits, LayerSensRank
	PresentTokTarget Presence = 1 << 26 // TokPerSecTarget

	// 1.3: CPU contention.
	PresentCPUPSI       Presence = 1 << 27 // CPUPSISomeAvg10
	PresentCPULoad      Presence = 1 << 28 // CPURunnable and CPUAllowed
	PresentStepBaseline Presence = 1 << 29 // StepTimeRatio

	// 1.4: repacked weights.
	PresentRepack Presence = 1 << 30 // RepackLayers, RepackLayersMax, RepackMB, RepackMBMax

	// 1.5: CPU use over a span.
	PresentCPUBusy Presence = 1 << 31 // CPUOtherBusy, CPUPSISomeRecent, CPUSpanMS

	// 1.6
	PresentLatencyShape Presence = 1 << 32 // LayerLatencyBatch, LayerLatencyPos
	PresentDraft        Presence = 1 << 33 // DraftState, DraftMB

	// 1.7
	PresentEvict Presence = 1 << 34 // KVEvict
)

// Presence bits each minor added; a reader clears a minor's bits when the
// writer's struct ends before that minor's fields.
const (
	presence11 = PresentSpecAccept | PresentSpecCost | PresentSpecKMax
	presence12 = PresentManifest | PresentTokTarget
	presence13 = PresentCPUPSI | PresentCPULoad | PresentStepBaseline
	presence14 = PresentRepack
	presence15 = PresentCPUBusy
	presence16 = PresentLatencyShape | PresentDraft
	presence17 = PresentEvict
)

// Sensors is what the host tells a policy at each call: device readings,
// engine telemetry and the engine's current adaptive state. The JSON names are
// those of sensor traces (host/trace); traces carry t_ms, which the trace
// reader converts to TimeNS.
type Sensors struct {
	// Present says which readings below are valid.
	Present Presence `json:"-"`
	// Step is the decode step index (0-based, counts tokens decoded).
	Step uint64 `json:"step"`
	// TimeNS is monotonic time in nanoseconds since an arbitrary origin
	// (traces: t_ms × 1e6).
	TimeNS int64 `json:"t_ns"`

	// MemAvailableMB is available memory (MemInfo.availMem or /proc/meminfo
	// MemAvailable), MiB.
	MemAvailableMB int32 `json:"mem_available_mb"`
	// MemThresholdMB is the low-memory threshold (MemInfo.threshold), MiB.
	MemThresholdMB int32 `json:"mem_threshold_mb"`
	// MemTotalMB is total memory (MemInfo.totalMem / MemTotal), MiB.
	MemTotalMB int32 `json:"mem_total_mb"`
	// LowMemory is MemInfo.lowMemory: the system considers itself low on memory.
	LowMemory bool `json:"low_memory"`
	// TrimLevel is the last onTrimMemory level (TrimNone if none).
	TrimLevel TrimLevel `json:"trim_level"`
	// ThermalStatus is PowerManager's thermal status, 0–6.
	ThermalStatus ThermalStatus `json:"thermal_status"`
	// Charging is true while the device is plugged in.
	Charging bool `json:"charging"`
	// PSISomeAvg10 is memory PSI "some" avg10, percent (0–100).
	PSISomeAvg10 float32 `json:"psi_some_avg10"`
	// PSIFullAvg10 is memory PSI "full" avg10, percent (0–100).
	PSIFullAvg10 float32 `json:"psi_full_avg10"`
	// CgroupLimitMB is the memory cgroup limit, MiB (bit clear: no limit).
	CgroupLimitMB int32 `json:"cgroup_limit_mb"`
	// CgroupUsageMB is the memory cgroup usage, MiB.
	CgroupUsageMB int32 `json:"cgroup_usage_mb"`
	// RSSMB is the process resident set size, MiB.
	RSSMB int32 `json:"rss_mb"`
	// PSSMB is the process proportional set size (smaps_rollup Pss), MiB.
	PSSMB int32 `json:"pss_mb"`
	// TempC is the device (skin or SoC) temperature, °C.
	TempC float32 `json:"temp_c"`
	// BatteryPct is the battery level, percent (0–100).
	BatteryPct float32 `json:"battery_pct"`
	// TokPerSec is the throughput of the last step, tokens/s.
	TokPerSec float32 `json:"tok_per_sec"`
	// TokPerSecSmoothed is the smoothed (EMA) throughput, tokens/s.
	TokPerSecSmoothed float32 `json:"tok_per_sec_smoothed"`
	// AcceptRate is the smoothed speculative acceptance rate, 0–1.
	AcceptRate float32 `json:"accept_rate"`
	// CtxLen is the number of tokens in the context (KV positions in use).
	CtxLen int32 `json:"ctx_len"`
	// TiersAvailable is the number of tiers the engine can switch between;
	// tier 0 is the highest precision.
	TiersAvailable int32 `json:"tiers_available"`
	// LayerCount is the number of model layers (LayerLatencyUS and
	// CurLayerBits are valid for [0, min(LayerCount, MaxLayers))).
	LayerCount int32 `json:"layer_count"`

	// CurTier is the current tier index.
	CurTier int32 `json:"cur_tier"`
	// CurSpecK is the current speculation length (0 = off).
	CurSpecK int32 `json:"cur_spec_k"`
	// CurWindow is the current KV window in tokens (0 = full context).
	CurWindow int32 `json:"cur_window"`
	// CurAnchors is the current number of anchor (sink) tokens.
	CurAnchors int32 `json:"cur_anchors"`
	// CurKVType is the current KV cache type.
	CurKVType KVType `json:"cur_kv_type"`

	// LayerLatencyUS is the per-layer decode latency of the last step, µs.
	LayerLatencyUS [MaxLayers]float32 `json:"layer_latency_us"`
	// CurLayerBits is the current per-layer weight precision, bits.
	CurLayerBits [MaxLayers]uint8 `json:"cur_layer_bits"`

	// 1.1: speculative decoding. The engine measures these while it runs.

	// SpecAcceptByPos is the smoothed acceptance of the draft token at
	// position i of a round (0-based), 0–1: how often it was accepted given
	// that every earlier one was.
	SpecAcceptByPos [MaxSpecK]float32 `json:"spec_accept_by_pos"`
	// SpecMeanAccepted is the smoothed mean number of draft tokens accepted
	// per round.
	SpecMeanAccepted float32 `json:"spec_mean_accepted"`
	// SpecDraftCost is the measured time of one draft step divided by the
	// time of one plain target step.
	SpecDraftCost float32 `json:"spec_draft_cost"`
	// SpecVerifyCost[i] is the measured time of a target batch of n = i+1
	// tokens divided by the time of one plain target step: v(n).
	SpecVerifyCost [MaxSpecK + 1]float32 `json:"spec_verify_cost"`
	// SpecKMax is the largest K the engine accepts now (0: no draft).
	SpecKMax int32 `json:"spec_k_max"`

	// 1.2: per-layer precision, from the precision manifest.

	// LayerMinBits is the lowest precision each layer tolerates, bits.
	LayerMinBits [MaxLayers]uint8 `json:"layer_min_bits"`
	// LayerMaxBits is the highest precision available for each layer, bits.
	LayerMaxBits [MaxLayers]uint8 `json:"layer_max_bits"`
	// LayerSensRank is each layer's sensitivity rank: 0 is the most
	// sensitive layer (demote it last, promote it first).
	LayerSensRank [MaxLayers]uint8 `json:"layer_sens_rank"`
	// TokPerSecTarget is the throughput the embedding app asks for, tokens/s.
	TokPerSecTarget float32 `json:"tok_per_sec_target"`

	// 1.3: CPU contention.

	// CPUPSISomeAvg10 is CPU PSI "some" avg10 (/proc/pressure/cpu), percent.
	CPUPSISomeAvg10 float32 `json:"cpu_psi_some_avg10"`
	// CPURunnable is the number of runnable tasks on the machine
	// (procs_running), this process's threads included.
	CPURunnable float32 `json:"cpu_runnable"`
	// CPUAllowed is the number of CPUs this process may run on (its affinity
	// mask within its cpuset).
	CPUAllowed int32 `json:"cpu_allowed"`
	// StepTimeRatio is the engine's recent decode step time divided by its
	// quiet baseline at the same thread count (1 = no slowdown).
	StepTimeRatio float32 `json:"step_time_ratio"`
	// CurThreads is the current number of decode threads.
	CurThreads int32 `json:"cur_threads"`

	// 1.4: repacked weights. An engine that supports the lever sets
	// PresentRepack; one loaded without repacking reports RepackLayersMax 0.

	// RepackLayers is the number of layers whose repacked weights are in use,
	// from layer 0 up; the output head counts as one more (layer LayerCount).
	RepackLayers int32 `json:"repack_layers"`
	// RepackLayersMax is the number of layers that can be repacked, the
	// output head included (0: the model was loaded without repacking).
	RepackLayersMax int32 `json:"repack_layers_max"`
	// RepackMB is the anonymous memory of the repacked weights in use, MiB:
	// memory the kernel cannot drop under pressure, unlike the mapped file.
	RepackMB int32 `json:"repack_mb"`
	// RepackMBMax is RepackMB with every layer repacked, MiB.
	RepackMBMax int32 `json:"repack_mb_max"`

	// 1.5: CPU use over the last span of CPUSpanMS milliseconds, integrated
	// rather than sampled (CPURunnable is one instant, and on kernels with
	// EEVDF's delayed dequeue it counts tasks that are about to sleep).

	// CPUOtherBusy is the CPU time other processes used on the CPUs this
	// process may use, divided by the span: cores' worth (0 = the CPUs were
	// this process's or idle; 1 = one core's worth went elsewhere).
	CPUOtherBusy float32 `json:"cpu_other_busy"`
	// CPUPSISomeRecent is CPU PSI "some" over the span, percent: the share
	// of it in which at least one runnable task waited for a CPU.
	CPUPSISomeRecent float32 `json:"cpu_psi_some_recent"`
	// CPUSpanMS is the span both were measured over, milliseconds.
	CPUSpanMS float32 `json:"cpu_span_ms"`

	// 1.6: what the per-layer latencies were measured on, and the draft
	// model's state (speculation under memory pressure).

	// LayerLatencyBatch is the number of tokens in the forward pass that
	// LayerLatencyUS was measured on: 1 for a plain decode step, K+1 for a
	// verify batch, n for a prefill of n tokens.
	LayerLatencyBatch int32 `json:"layer_latency_batch"`
	// LayerLatencyPos is the KV position (context tokens before the pass)
	// of that forward pass.
	LayerLatencyPos int32 `json:"layer_latency_pos"`
	// DraftState is the draft model's state: DraftNone, DraftAttached or
	// DraftDetached.
	DraftState int32 `json:"draft_state"`
	// DraftMB is the memory the draft holds now, MiB: its resident weights
	// plus its KV cache (0 when detached).
	DraftMB float32 `json:"draft_mb"`

	// 1.7: what the KV window does with evicted positions.

	// KVEvict is the eviction mode in force: EvictDrop (1) or EvictMerge
	// (2, evicted K/V folded into the next visible position with a decay
	// weight). Present only on engines that can merge.
	KVEvict int32 `json:"kv_evict"`
}

// Values of Sensors.DraftState (ABI 1.6).
const (
	DraftNone     = 0 // no draft model configured
	DraftAttached = 1 // a draft is attached and may speculate
	DraftDetached = 2 // a draft is configured but dropped; its memory is freed
)

// Has reports whether all readings in p are present.
func (s *Sensors) Has(p Presence) bool { return s.Present&p == p }
