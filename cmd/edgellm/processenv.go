package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/edgellm/edgellm/host"
)

// Process-wide tuning the CLI takes from the environment (library code
// reads none): the library keeps the Go setters.
const (
	// spinEnv sets host.SetBarrierSpinLimit in microseconds; 0 restores ggml's
	// unbounded barrier spin.
	spinEnv = "EDGELLM_BARRIER_SPIN_US"
	// hugePagesEnv = 0 turns off host.SetRepackHugePages.
	hugePagesEnv = "EDGELLM_REPACK_HUGEPAGES"
)

// applyProcessEnv applies the process-wide settings found by lookup
// (os.LookupEnv) and reports a malformed one on stderr, keeping the default.
func applyProcessEnv(lookup func(string) (string, bool), stderr io.Writer) {
	if v, ok := lookup(spinEnv); ok {
		us, err := strconv.Atoi(v)
		if err != nil || us < 0 {
			fmt.Fprintf(stderr, "edgellm: %s=%q: want microseconds ≥ 0; keeping %v\n", spinEnv, v, host.DefaultBarrierSpinLimit)
		} else {
			host.SetBarrierSpinLimit(time.Duration(us) * time.Microsecond)
		}
	}
	if v, ok := lookup(hugePagesEnv); ok {
		host.SetRepackHugePages(v != "0")
	}
}
