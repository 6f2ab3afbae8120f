package scenario

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// CPU is CPU contention: other apps that want the engine's cores. Each hog
// is a real process (never simulated) with busy threads pinned round-robin
// to the CPUs the runner (and so the engine) may use, started and stopped
// at token positions through the token gate.
type CPU struct {
	Hogs []CPUHogSpec `yaml:"hogs"`
}

// CPUHogSpec is one CPU hog: Threads busy threads (0: one per allowed CPU)
// from token AtToken until token UntilToken (absent: to the end).
type CPUHogSpec struct {
	AtToken    *int `yaml:"at_token"`
	UntilToken *int `yaml:"until_token"`
	Threads    int  `yaml:"threads"`
}

// CPUPhase is one stretch of a run between CPU events, tokens [From, To):
// how fast it decoded, at which thread counts, and what it cost.
type CPUPhase struct {
	From int `json:"from"`
	To   int `json:"to"`
	// HogThreads is the number of busy hog threads during the phase.
	HogThreads int `json:"hog_threads"`
	// TPS is tokens per second between the phase's first and last token.
	TPS float64 `json:"tps"`
	// ThreadsMin, ThreadsMax and ThreadsLast are the engine's decode thread
	// counts over the phase's tokens.
	ThreadsMin  int `json:"threads_min"`
	ThreadsMax  int `json:"threads_max"`
	ThreadsLast int `json:"threads_last"`
	// CPUPerTokenMs and CoresBusy are the engine process's CPU time (all
	// threads, /proc/PID/stat, read while it waits at the token gate at each
	// end) per token and over the phase's wall time; 0 when an end is not
	// gated (the first phase starts with the model load).
	CPUPerTokenMs float64 `json:"cpu_per_token_ms"`
	CoresBusy     float64 `json:"cores_busy"`
	// OthersMedian is the median over the runner's samples of the
	// machine's runnable tasks (/proc/loadavg) minus the runner's own
	// thread and the engine's decode threads: other load than this run's.
	OthersMedian float64 `json:"others_median"`
	// HogCPUMs is the CPU time the hogs used during the phase: proof they
	// competed.
	HogCPUMs float64 `json:"hog_cpu_ms"`
	// OtherBusy is the CPU time other processes used on the allowed CPUs
	// during the phase, in cores: their busy time in /proc/stat less the
	// engine's, the hogs' and the runner's, over the phase's wall time,
	// both ends read at the token gate (the first phase's start when the
	// runner first sees the engine, while it loads); -1 when unread.
	// OtherBusyRes bounds its error: /proc/stat's tick per CPU and the
	// engine's /proc/PID/stat tick, over the wall time. Unlike
	// OthersMedian it counts what other tasks used, not how many were
	// queued at a few instants (on kernels with delayed dequeue, 6.12+,
	// the run queue holds tasks that are about to sleep).
	OtherBusy    float64 `json:"other_busy"`
	OtherBusyRes float64 `json:"other_busy_res"`
}

// validate checks the cpu section against n tokens.
func (c *CPU) validate(n int) error {
	if len(c.Hogs) == 0 {
		return fmt.Errorf("cpu.hogs: empty")
	}
	for i := range c.Hogs {
		h := &c.Hogs[i]
		switch {
		case h.AtToken == nil:
			return fmt.Errorf("cpu.hogs[%d]: at_token is required (CPU load is tied to token positions)", i)
		case *h.AtToken < 0 || *h.AtToken >= n:
			return fmt.Errorf("cpu.hogs[%d].at_token %d: want 0–%d (n is %d)", i, *h.AtToken, n-1, n)
		case h.UntilToken != nil && (*h.UntilToken <= *h.AtToken || *h.UntilToken >= n):
			return fmt.Errorf("cpu.hogs[%d].until_token %d: want %d–%d (after at_token, before n)", i, *h.UntilToken, *h.AtToken+1, n-1)
		case h.Threads < 0 || h.Threads > 1024:
			return fmt.Errorf("cpu.hogs[%d].threads %d: want 0 (one per allowed CPU) to 1024", i, h.Threads)
		}
	}
	return nil
}

// positions are the token positions where the CPU load changes, and n-1
// (a gate there closes the last phase), ascending and unique.
func (c *CPU) positions(n int) []int {
	seen := map[int]bool{0: true, n - 1: true}
	at := []int{0}
	add := func(p int) {
		if !seen[p] {
			seen[p] = true
			at = append(at, p)
		}
	}
	for _, h := range c.Hogs {
		add(*h.AtToken)
		if h.UntilToken != nil {
			add(*h.UntilToken)
		}
	}
	at = append(at, n-1)
	slices.Sort(at)
	return at
}

// writeCPUPhases prints each policy's CPU phases (nothing without any).
func writeCPUPhases(w io.Writer, r *Report) {
	if r.CPU == nil {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\ttokens\thog threads\ttok/s\t÷ best other\tthreads min/max/last\tCPU ms/token\tcores busy\thog CPU ms\tother cores (±res)\tother runnable (median)")
	for pi, p := range r.Policies {
		for i, ph := range p.CPUPhases {
			cpu, busy := "-", "-"
			if ph.CPUPerTokenMs > 0 {
				cpu, busy = fmt.Sprintf("%.2f", ph.CPUPerTokenMs), fmt.Sprintf("%.2f", ph.CoresBusy)
			}
			// This contender's tok/s over the best other's in the same phase.
			best := 0.0
			for qi, q := range r.Policies {
				if qi != pi && i < len(q.CPUPhases) {
					best = max(best, q.CPUPhases[i].TPS)
				}
			}
			ratio := "-"
			if best > 0 {
				ratio = fmt.Sprintf("%.3f", ph.TPS/best)
			}
			other := "-"
			if ph.OtherBusy >= 0 && ph.OtherBusyRes > 0 {
				other = fmt.Sprintf("%.2f ±%.2f", ph.OtherBusy, ph.OtherBusyRes)
			}
			fmt.Fprintf(tw, "%s\t%d–%d\t%d\t%.1f\t%s\t%d/%d/%d\t%s\t%s\t%.0f\t%s\t%.0f\n", p.Name, ph.From, ph.To, ph.HogThreads, ph.TPS, ratio,
				ph.ThreadsMin, ph.ThreadsMax, ph.ThreadsLast, cpu, busy, ph.HogCPUMs, other, ph.OthersMedian)
		}
	}
	tw.Flush()
	if n := len(r.Policies); n > 0 && len(r.Policies[0].CPUPhaseRuns) > 1 {
		fmt.Fprintf(w, "each phase: the repeat with the median tok/s of %d (cpu_phase_runs in the JSON has them all)\n", len(r.Policies[0].CPUPhaseRuns))
	}
}

// threads is the contender's starting decode thread count: its own when
// given, else the scenario's.
func (p Policy) threads(s *Spec) int {
	if p.Threads > 0 {
		return p.Threads
	}
	return s.Threads
}
