package scenario

// Report is the outcome of one scenario run: every policy on the same model,
// prompt and pressure, one after another.
type Report struct {
	Scenario string `json:"scenario"`
	File     string `json:"file,omitempty"`
	// Pressure says how pressure was applied: "real (cgroup v1: …)" or
	// "SIMULATED (…)"; Simulated is true in the second case.
	Pressure  string   `json:"pressure"`
	Simulated bool     `json:"simulated"`
	Tiers     []Tier   `json:"tiers"`
	Prompt    string   `json:"prompt"`
	N         int      `json:"n"`
	Threads   int      `json:"threads"`
	Ctx       int      `json:"ctx"`
	Engine    string   `json:"engine"` // the spec's engine choice (auto, native, llamacpp)
	Memory    *Memory  `json:"memory,omitempty"`
	Thermal   *Thermal `json:"thermal,omitempty"`
	CPU       *CPU     `json:"cpu,omitempty"`
	// Sensors is what the policies read: live sensors or a thermal trace.
	Sensors  string         `json:"sensors"`
	Policies []PolicyResult `json:"policies"`
}

// PolicyResult is one policy's run.
type PolicyResult struct {
	Name string `json:"name"`
	Wasm string `json:"wasm"`
	// Outcome is "completed", "oom-killed", "killed by signal …" or
	// "failed (exit N): …".
	Outcome   string `json:"outcome"`
	Completed bool   `json:"completed"`
	OOMKilled bool   `json:"oom_killed"` // the engine was killed by the OOM killer
	// OOMKills is the cgroup's oom_kill counter at the end (engine and hogs).
	OOMKills uint64 `json:"oom_kills"`
	ExitCode int    `json:"exit_code"`
	// Engine is the engine that ran ("native" or "llamacpp", from its
	// "model: …" line; "" when it did not say).
	Engine string `json:"engine,omitempty"`
	Error  string `json:"error,omitempty"` // the engine's last stderr line on failure

	Tokens    int     `json:"tokens"`
	DecodeTPS float64 `json:"decode_tps"` // the engine's steady-state figure (0 if it did not finish)
	// MeanTPS is tokens / time over all decode steps seen; MeanTPSThrottled
	// the same from the first thermal step with a quota on (0 without).
	MeanTPS          float64 `json:"mean_tps"`
	MeanTPSThrottled float64 `json:"mean_tps_throttled,omitempty"`
	// MeanTPSThrottledSteady is MeanTPSThrottled from the last tier swap
	// (or per-layer precision change) under the quota on (the swap's own
	// time left out; equal to it for a run that does not swap).
	MeanTPSThrottledSteady float64 `json:"mean_tps_throttled_steady,omitempty"`

	PolicyCalls    int `json:"policy_calls"`
	PolicyChanges  int `json:"policy_changes"`
	TierSwaps      int `json:"tier_swaps"`
	PolicyFailures int `json:"policy_failures"`

	// MeanBitsPerWeight is the time-weighted bits per weight of the tiers
	// used (the quality proxy: higher is closer to the top tier).
	MeanBitsPerWeight float64 `json:"mean_bits_per_weight"`

	// Quality is KL divergence against the highest tier on the run's own
	// tokens (nil when it could not be measured: QualityError says why).
	Quality      *Quality `json:"quality,omitempty"`
	QualityError string   `json:"quality_error,omitempty"`

	// CPUPeriods, CPUThrottled and CPUThrottledMs are the cgroup's CFS
	// bandwidth statistics (periods enforced, periods throttled, time
	// throttled): proof the quota was in place and bit.
	CPUPeriods     uint64  `json:"cpu_periods"`
	CPUThrottled   uint64  `json:"cpu_throttled_periods"`
	CPUThrottledMs float64 `json:"cpu_throttled_ms"`

	PeakRSSMB    float64 `json:"peak_rss_mb"`
	PeakPSSMB    float64 `json:"peak_pss_mb"`
	PeakCgroupMB float64 `json:"peak_cgroup_mb,omitempty"`

	// CPUPhases are the stretches between CPU hog events (cpu scenarios).
	CPUPhases []CPUPhase `json:"cpu_phases,omitempty"`
	// CPUPhaseRuns are every repeat's phases (Spec.Repeats > 1); CPUPhases
	// then holds, per phase, the one with the median tok/s.
	CPUPhaseRuns [][]CPUPhase `json:"cpu_phase_runs,omitempty"`
	Hogs         []HogOutcome `json:"hogs,omitempty"`
	// Serve is the client's view when the scenario runs `edgellm serve`.
	Serve    *ServeOutcome `json:"serve,omitempty"`
	Events   []Event       `json:"events"`
	Timeline []TokenPoint  `json:"timeline"`
	Samples  []MemSample   `json:"samples"`
	// CgroupDirs are the cgroup directories the engine ran in (removed
	// before Run returns).
	CgroupDirs []string `json:"cgroup_dirs,omitempty"`
	// StderrFile and StdoutFile keep the engine's output.
	StderrFile string `json:"stderr_file"`
	StdoutFile string `json:"stdout_file"`
}

// HogOutcome is what became of one background app.
type HogOutcome struct {
	MB      int     `json:"mb"`
	Trigger string  `json:"trigger"` // "at_ms 500" or "at_token 32"
	TMs     float64 `json:"t_ms"`    // when it started (−1: never)
	Ready   bool    `json:"ready"`   // all its memory became resident
	Result  string  `json:"result"`
	Killed  bool    `json:"killed"`
}

// Event is something that happened during a run, at TMs after the engine
// process started.
type Event struct {
	TMs  float64 `json:"t_ms"`
	What string  `json:"what"`
}

// TokenPoint is one generated token.
type TokenPoint struct {
	TMs     float64 `json:"t_ms"`
	I       int     `json:"i"`
	Tier    int     `json:"tier"`
	K       int     `json:"k"`
	Window  int     `json:"window"`
	Threads int     `json:"threads"`
	// Repack is the units using repacked weights (scenario repack: true;
	// 0 without or when all are released).
	Repack int `json:"repack_layers,omitempty"`
	// Bits is the bits per weight of the layers' weight sets that produced
	// this token (per_layer contenders; 0: the tier's, Report.Tiers).
	Bits float64 `json:"bits,omitempty"`
	// KL is KL(tier 0 ‖ this run) at this token, nats (see Quality).
	KL float64 `json:"kl"`
}

// MemSample is the engine's memory at TMs: its RSS and PSS
// (/proc/PID/smaps_rollup) and the cgroup's charge (engine + hogs).
type MemSample struct {
	TMs      float64 `json:"t_ms"`
	RSSMB    float64 `json:"rss_mb"`
	PSSMB    float64 `json:"pss_mb"`
	CgroupMB float64 `json:"cgroup_mb,omitempty"`
}
