package scenario

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/trace"
)

// simOverheadMB is what the simulated memory trace adds to the top tier's
// file size as the engine's own memory (runtime, KV cache, buffers). It is
// an estimate: simulated readings are labelled as such everywhere.
const simOverheadMB = 48

// traceRecords makes the sensor trace of the scenario, one record per
// change, t_ms = token index (the engine replays it with --trace-step-ms 1).
//   - thermal: thermal_status from the schedule (status none before it);
//   - simulated memory: cgroup_limit_mb and an estimated cgroup_usage_mb
//     (top tier size + simOverheadMB + the hogs started so far). The estimate
//     does not follow the engine's tier: it is a SIMULATED reading.
func (r *runner) traceRecords() ([]trace.Record, error) {
	s := r.s
	var recs []trace.Record
	if th := s.Thermal; th != nil {
		if *th.Schedule[0].AtToken > 0 {
			recs = append(recs, thermalRecord(0, abi.ThermalNone))
		}
		for _, st := range th.Schedule {
			recs = append(recs, thermalRecord(int64(*st.AtToken), st.status))
		}
	}
	// Memory readings are simulated only where the pressure is: with real
	// pressure the engine reads its own cgroup live.
	if m := s.Memory; m != nil && !r.mode.real {
		type change struct {
			at int64
			mb int
		}
		var ch []change
		for i, h := range m.Hogs {
			if h.AtToken == nil {
				return nil, fmt.Errorf("memory.hogs[%d]: at_ms cannot be simulated (the trace is replayed per decode step): use at_token", i)
			}
			ch = append(ch, change{int64(*h.AtToken), h.MB})
		}
		sort.Slice(ch, func(i, j int) bool { return ch[i].at < ch[j].at })
		usage := r.tiers[0].SizeMB + simOverheadMB
		recs = append(recs, memRecord(0, m.LimitMB, usage))
		for _, c := range ch {
			usage += float64(c.mb)
			recs = append(recs, memRecord(c.at, m.LimitMB, usage))
		}
	}
	// The replayer wants non-decreasing times; records of one time overlay
	// each other (they carry different fields).
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].TMs < recs[j].TMs })
	return recs, nil
}

func thermalRecord(t int64, st abi.ThermalStatus) trace.Record {
	r := trace.Record{TMs: t, Present: abi.PresentThermalStatus}
	r.Values.ThermalStatus = st
	return r
}

func memRecord(t int64, limitMB int, usageMB float64) trace.Record {
	r := trace.Record{TMs: t, Present: abi.PresentCgroupLimit | abi.PresentCgroupUsage}
	r.Values.CgroupLimitMB = int32(limitMB)
	r.Values.CgroupUsageMB = int32(usageMB + 0.5)
	return r
}

func writeTrace(path string, recs []trace.Record) error {
	if len(recs) == 0 {
		return errors.New("scenario: empty sensor trace")
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	w := trace.NewWriter(f)
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
