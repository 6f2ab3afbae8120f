//go:build linux

package scenario

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

func (r *runner) nHogs() int {
	if r.s.Memory == nil {
		return 0
	}
	return len(r.s.Memory.Hogs)
}

// outcome fills the verdict and the derived figures.
func (r *runner) outcome(res *PolicyResult, waitErr error, m *monitor) {
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		res.Outcome, res.Completed = "completed", true
	case errors.As(waitErr, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		res.ExitCode = ee.ExitCode()
		switch {
		case ws.Signaled() && ws.Signal() == syscall.SIGKILL && res.OOMKills > m.hogsKilled:
			res.Outcome, res.OOMKilled = "oom-killed", true
		case ws.Signaled():
			res.Outcome = "killed by signal " + ws.Signal().String()
		default:
			res.Outcome = fmt.Sprintf("failed (exit %d)", res.ExitCode)
		}
	default:
		res.Outcome = "failed: " + waitErr.Error()
	}
	if !res.Completed && !res.OOMKilled && res.Error == "" {
		res.Error = lastLine(res.StderrFile)
	}
	if !res.Completed {
		if res.OOMKilled {
			m.event(fmt.Sprintf("engine OOM-killed after %d tokens (cgroup oom_kill %d)", len(res.Timeline), res.OOMKills))
		}
	}
	res.Tokens = len(res.Timeline)
	tl := res.Timeline
	if n := len(tl); n >= 2 {
		res.MeanTPS = float64(n-1) / ((tl[n-1].TMs - tl[0].TMs) / 1000)
		var wsum, tsum float64
		for j := 1; j < n; j++ {
			dt := tl[j].TMs - tl[j-1].TMs
			if b := tl[j].Bits; b > 0 {
				wsum += dt * b
				tsum += dt
			} else if tier := tl[j].Tier; tier >= 0 && tier < len(r.tiers) {
				wsum += dt * r.tiers[tier].BitsPerWeight
				tsum += dt
			}
		}
		if tsum > 0 {
			res.MeanBitsPerWeight = wsum / tsum
		}
	} else if n == 1 && tl[0].Tier < len(r.tiers) {
		res.MeanBitsPerWeight = r.tiers[tl[0].Tier].BitsPerWeight
	}
	if th := r.s.Thermal; th != nil {
		from := -1
		for _, st := range th.Schedule {
			if st.CPUs > 0 {
				from = *st.AtToken
				break
			}
		}
		if from >= 0 && len(tl) > from+1 {
			res.MeanTPSThrottled = meanTPS(tl[from:])
			// After the last tier swap under the quota: the swap itself (a
			// load of the new tier at a fraction of a CPU) is left out.
			steady := from
			for j := from + 1; j < len(tl); j++ {
				if tl[j].Tier != tl[j-1].Tier || tl[j].Bits != tl[j-1].Bits {
					steady = j
				}
			}
			if len(tl) > steady+1 {
				res.MeanTPSThrottledSteady = meanTPS(tl[steady:])
			}
		}
	}
	r.swapEvents(res)
}

// engineRE finds the engine in run's "model: … engine NAME]" line.
var engineRE = regexp.MustCompile(`^model: .*, engine (\w+)\]$`)

// swapEvents adds the engine's tier decisions (its stderr lines
// "[policy step N: …]") as events at the time of token N, and the engine
// that ran (PolicyResult.Engine).
func (r *runner) swapEvents(res *PolicyResult) {
	b, err := os.ReadFile(res.StderrFile)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if m := engineRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil && res.Engine == "" {
			res.Engine = m[1]
		}
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "[policy step ")
		if !ok {
			continue
		}
		num, what, _ := strings.Cut(rest, ":")
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		t := -1.0
		if n > 0 && n <= len(res.Timeline) {
			t = res.Timeline[n-1].TMs
		}
		res.Events = append(res.Events, Event{TMs: t, What: "policy at step " + num + ":" + strings.TrimSuffix(what, "]")})
		if !res.Completed && strings.Contains(what, "(swap ") {
			res.TierSwaps++ // no end line from a killed engine: count its swaps here
		}
	}
}

func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// meanTPS is tokens per second between the first and the last point of seg
// (len(seg) ≥ 2): the time of its first token, which may include a swap,
// is not counted.
func meanTPS(seg []TokenPoint) float64 {
	return float64(len(seg)-1) / ((seg[len(seg)-1].TMs - seg[0].TMs) / 1000)
}
