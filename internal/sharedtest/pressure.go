package sharedtest

import (
	"os"
	"strconv"
	"strings"
)

// CPUPressure reads the "some" line of /proc/pressure/cpu: the share of
// time (percent) in which some runnable task waited for a CPU, averaged over
// window "avg10", "avg60" or "avg300". ok is false where PSI is absent.
// Tests use it to tell a contended machine, where wall-clock shares and CPU
// quotas measure the other jobs too, from a quiet one.
func CPUPressure(window string) (pct float64, ok bool) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	for _, f := range strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) {
		if v, found := strings.CutPrefix(f, window+"="); found {
			x, err := strconv.ParseFloat(v, 64)
			return x, err == nil
		}
	}
	return 0, false
}
