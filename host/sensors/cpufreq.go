package sensors

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// CPUFreq is one core's clock: the current frequency (scaling_cur_freq,
// read every time) against the hardware maximum (cpuinfo_max_freq, read
// once). A current far below the maximum under load means thermal or power
// throttling. Offline cores read as not Present.
type CPUFreq struct {
	CPU     int
	Present bool
	CurKHz  int64
	MaxKHz  int64
}

// CPUFreqs is every core that has a cpufreq directory.
type CPUFreqs struct {
	N    int
	CPUs [MaxCPUs]CPUFreq
}

// Ratio is the mean of cur/max over the present cores (1 = full speed); ok is
// false when no core reports both.
func (c *CPUFreqs) Ratio() (r float64, ok bool) {
	n := 0
	for i := 0; i < c.N; i++ {
		if f := &c.CPUs[i]; f.Present && f.MaxKHz > 0 {
			r += float64(f.CurKHz) / float64(f.MaxKHz)
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return r / float64(n), true
}

type cpufreqFiles struct {
	cur  []kfile
	cpus []CPUFreq // static part (CPU, MaxKHz)
}

func (c *cpufreqFiles) close() {
	for i := range c.cur {
		c.cur[i].close()
	}
}

func openCPUFreq(dir string) cpufreqFiles {
	var c cpufreqFiles
	ents, _ := os.ReadDir(dir)
	sort.Slice(ents, func(i, j int) bool { return zoneIndex(ents[i].Name(), "cpu") < zoneIndex(ents[j].Name(), "cpu") })
	for _, e := range ents {
		n := zoneIndex(e.Name(), "cpu")
		if n < 0 || len(c.cur) == MaxCPUs {
			continue
		}
		fd := filepath.Join(dir, e.Name(), "cpufreq")
		f := openKFile(filepath.Join(fd, "scaling_cur_freq"))
		if !f.ok() {
			continue
		}
		var max int64
		if s, ok := readTrim(filepath.Join(fd, "cpuinfo_max_freq")); ok {
			max, _ = strconv.ParseInt(s, 10, 64)
		}
		c.cur = append(c.cur, f)
		c.cpus = append(c.cpus, CPUFreq{CPU: n, MaxKHz: max})
	}
	return c
}

func (c *cpufreqFiles) read(buf []byte, out *CPUFreqs) {
	out.N = len(c.cur)
	for i := range c.cur {
		f := &out.CPUs[i]
		*f = c.cpus[i]
		if b, ok := c.cur[i].read(buf); ok {
			f.CurKHz, f.Present = parseInt(b)
		}
	}
}
