package sensors

// CPUAllowed is how many CPUs this process may run on: its affinity mask
// (taskset, sched_setaffinity) intersected with its cgroup's
// cpuset.cpus.effective (v2) when that file exists. The kernel normally keeps
// the affinity inside the cpuset already; the intersection also covers a
// cpuset narrowed after the mask was last set.
type CPUAllowed struct {
	Present bool
	N       int       // CPUs in the intersection
	Online  int       // CPUs in the affinity mask alone
	Mask    [2]uint64 // the intersection, CPUs 0-127 (bit i = CPU i)
}

// maxCPUList bounds the CPU ids parseCPUList keeps (ids past it are ignored).
const maxCPUList = 128

// parseCPUList reads the kernel's CPU list format ("0-3,5,7-8\n") into a
// mask. ok is false on anything else, or on an empty list.
func parseCPUList(b []byte, mask *[2]uint64) (n int, ok bool) {
	*mask = [2]uint64{}
	line, _ := cutLine(b)
	if len(line) == 0 {
		return 0, false
	}
	for len(line) > 0 {
		i := 0
		for i < len(line) && line[i] != ',' {
			i++
		}
		item := line[:i]
		if i < len(line) {
			line = line[i+1:]
			if len(line) == 0 {
				return 0, false // trailing comma
			}
		} else {
			line = nil
		}
		dash := -1
		for j, c := range item {
			if c == '-' {
				dash = j
				break
			}
		}
		var lo, hi int64
		var ok1, ok2 bool
		if dash < 0 {
			lo, ok1 = parseInt(item)
			hi, ok2 = lo, ok1
		} else {
			lo, ok1 = parseInt(item[:dash])
			hi, ok2 = parseInt(item[dash+1:])
		}
		if !ok1 || !ok2 || lo < 0 || hi < lo {
			return 0, false
		}
		for c := lo; c <= hi && c < maxCPUList; c++ {
			if mask[c/64]&(1<<(c%64)) == 0 {
				mask[c/64] |= 1 << (c % 64)
				n++
			}
		}
	}
	return n, n > 0
}

// readCPUAllowed fills a from the calling thread's affinity and, when present,
// the cgroup's cpuset file content (nil: none).
func readCPUAllowed(cpuset []byte, a *CPUAllowed) {
	*a = CPUAllowed{}
	aff, online, ok := affinity()
	if !ok {
		return
	}
	a.Present, a.Online, a.Mask = true, online, aff
	if cpuset != nil {
		var cs [2]uint64
		if _, ok := parseCPUList(cpuset, &cs); ok {
			a.Mask[0] &= cs[0]
			a.Mask[1] &= cs[1]
		}
	}
	for _, w := range a.Mask {
		for ; w != 0; w &= w - 1 {
			a.N++
		}
	}
}
