package bench

import "github.com/edgellm/edgellm/kernels"

// The kernels' own measurements, for the CLI's benchmarks (the CLI reaches
// kernels only through this package).

// SpinStats counts barrier waits (kernels.ReadSpinStats).
type SpinStats = kernels.SpinStats

// ReadSpinStats reads the process's barrier-wait counters.
func ReadSpinStats() SpinStats { return kernels.ReadSpinStats() }

// AllowedCPUs lists the CPUs the calling thread may run on.
func AllowedCPUs() []int { return kernels.AllowedCPUs() }

// Argmax is the index of the largest logit.
func Argmax(l []float32) int32 { return kernels.Argmax(l) }
