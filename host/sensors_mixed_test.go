package host

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
)

// mixedSensors: live readings, with the fields the trace carries (here the
// thermal status) replaced by the trace's, and the live clock kept.
func TestMixedSensors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(p, []byte("{\"t_ms\":0,\"thermal_status\":0}\n{\"t_ms\":5,\"thermal_status\":3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := newTraceSensors(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	live, err := newLiveSensors(time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &mixedSensors{Live: live, Trace: tr}
	defer m.Close()
	var only abi.Sensors
	live.Fill(0, 0, &only)
	if !only.Has(abi.PresentMemTotal) {
		t.Skip("no /proc/meminfo here")
	}
	for _, tc := range []struct {
		step int
		want abi.ThermalStatus
	}{{0, abi.ThermalNone}, {4, abi.ThermalNone}, {6, abi.ThermalSevere}} {
		var s abi.Sensors
		m.Fill(tc.step, 0, &s)
		if s.ThermalStatus != tc.want || !s.Has(abi.PresentThermalStatus) {
			t.Errorf("step %d: thermal %v (present %v), want %v", tc.step, s.ThermalStatus, s.Has(abi.PresentThermalStatus), tc.want)
		}
		if !s.Has(abi.PresentMemTotal) || s.MemTotalMB != only.MemTotalMB {
			t.Errorf("step %d: live memory lost: total %d MiB, live %d", tc.step, s.MemTotalMB, only.MemTotalMB)
		}
		if s.TimeNS != only.TimeNS { // the trace would say step × 1 ms
			t.Errorf("step %d: time %d ns is the trace's, not the live clock (%d)", tc.step, s.TimeNS, only.TimeNS)
		}
	}
}
