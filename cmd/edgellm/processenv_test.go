package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/kernels"
)

// TestApplyProcessEnv: the CLI, not the kernels, maps EDGELLM_BARRIER_SPIN_US
// and EDGELLM_REPACK_HUGEPAGES onto host's process-wide setters; a malformed
// value is reported and the limit kept.
func TestApplyProcessEnv(t *testing.T) {
	defer host.SetBarrierSpinLimit(host.SetBarrierSpinLimit(host.DefaultBarrierSpinLimit))
	defer host.SetRepackHugePages(true)
	env := map[string]string{spinEnv: "250", hugePagesEnv: "0"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	applyProcessEnv(lookup, io.Discard)
	if got := host.BarrierSpinLimit(); got != 250*time.Microsecond {
		t.Errorf("%s=250: limit %v, want 250µs", spinEnv, got)
	}
	if kernels.RepackHugePages() {
		t.Errorf("%s=0: huge pages still advised", hugePagesEnv)
	}
	env = map[string]string{spinEnv: "-3"}
	var msg strings.Builder
	applyProcessEnv(lookup, &msg)
	if got := host.BarrierSpinLimit(); got != 250*time.Microsecond || !strings.Contains(msg.String(), spinEnv) {
		t.Errorf("%s=-3: limit %v (want kept 250µs), message %q", spinEnv, got, msg.String())
	}
}
