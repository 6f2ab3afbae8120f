package kernels

import (
	"golang.org/x/sys/unix"
)

// AllowedCPUs lists the CPU ids the calling thread may run on: its affinity
// mask, which the kernel keeps inside the process's cgroup cpuset (taskset
// and cpuset.cpus both narrow it). Nil when the mask cannot be read.
func AllowedCPUs() []int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return nil
	}
	var cpus []int
	for i := range len(set) * 64 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}

// AllowedCPUCount is len(AllowedCPUs()), 0 when unknown.
func AllowedCPUCount() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return 0
	}
	return set.Count()
}

// allowedMask narrows a requested CPU list to the CPUs the process may use,
// so a threadpool mask is always a subset of them. An empty request stays
// empty (ggml then leaves the threads on the inherited affinity); a request
// with no allowed CPU is an error naming both sets.
func allowedMask(want, allowed []int) ([]int, error) {
	if len(want) == 0 || allowed == nil {
		return want, nil
	}
	ok := make(map[int]bool, len(allowed))
	for _, c := range allowed {
		ok[c] = true
	}
	var out []int
	for _, c := range want {
		if ok[c] {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, ggmlErr("threadpool: none of CPUs %v is allowed for this process (allowed: %v)", want, allowed)
	}
	return out, nil
}
