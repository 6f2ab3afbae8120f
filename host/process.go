package host

import (
	"time"

	"github.com/edgellm/edgellm/kernels"
)

// Process-wide tuning of the compute kernels. The library reads no
// environment: the CLI maps EDGELLM_BARRIER_SPIN_US and
// EDGELLM_REPACK_HUGEPAGES to these; an app calls them itself.

// DefaultBarrierSpinLimit is how long a compute thread spins at ggml's
// barrier before it sleeps, unless SetBarrierSpinLimit changes it.
const DefaultBarrierSpinLimit = kernels.DefaultSpinLimit

// SetBarrierSpinLimit sets how long a thread waiting at a compute barrier
// spins before it sleeps, for every session of the process; 0 spins without
// bound, as ggml does. It returns the previous limit.
func SetBarrierSpinLimit(d time.Duration) time.Duration { return kernels.SetSpinLimit(d) }

// BarrierSpinLimit is the current limit (0: unbounded).
func BarrierSpinLimit() time.Duration { return kernels.SpinLimit() }

// SetRepackHugePages turns on or off (default on) the transparent huge-page
// advice of repacked weights loaded from now on (LoadOptions.Repack).
func SetRepackHugePages(on bool) { kernels.SetRepackHugePages(on) }
