package sensors

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edgellm/edgellm/internal/cputime"
)

// Source selects groups of sensors for WithSources.
type Source uint16

const (
	SourceMeminfo Source = 1 << iota // /proc/meminfo
	SourcePSI                        // /proc/pressure/memory
	SourceCgroup                     // the memory cgroup
	SourceSmaps                      // /proc/PID/smaps_rollup
	SourceThermal                    // /sys/class/thermal
	SourcePower                      // /sys/class/power_supply
	SourceCPUFreq                    // /sys/devices/system/cpu/cpu*/cpufreq
	SourceStatm                      // /proc/PID/statm
	SourceCPULoad                    // /proc/pressure/cpu, /proc/loadavg, affinity ∩ cpuset

	SourceAll = SourceMeminfo | SourcePSI | SourceCgroup | SourceSmaps | SourceThermal | SourcePower | SourceCPUFreq | SourceStatm | SourceCPULoad
)

// Option configures a Reader.
type Option func(*config)

type config struct {
	root        string
	pid         int
	sources     Source
	keepThermal func(string) bool
	smapsEvery  time.Duration
	cpuEvery    time.Duration
}

// WithRoot reads the kernel files under dir instead of "/" (dir/proc/meminfo,
// dir/sys/class/thermal, ...). Tests point it at fixture trees.
func WithRoot(dir string) Option { return func(c *config) { c.root = dir } }

// WithPID reads the per-process files (smaps_rollup, cgroup membership) of
// pid instead of the calling process.
func WithPID(pid int) Option { return func(c *config) { c.pid = pid } }

// WithSources limits the Reader to some groups of sensors (default
// SourceAll). Leaving out SourceSmaps saves its page-table walk when the
// process has a large resident set.
func WithSources(s Source) Option { return func(c *config) { c.sources = s } }

// WithSmapsInterval re-reads smaps_rollup at most every d and carries the
// last values forward in between (Smaps.Time says when they were read);
// a read that took longer than d/10000 stretches the wait to 10000 times
// its cost, up to 10 d (smapsWait).
// smaps_rollup is the one expensive sensor: the kernel walks the page tables
// of the whole process, which costs tens of microseconds for a Go binary and
// grows with the resident size (about 30 ns per resident 4 KiB page measured
// on the CI machine: 4 ms at 512 MiB), while PSS changes slowly. RSS stays
// fresh on every Read through /proc/PID/statm, a counter the kernel keeps.
// Default DefaultSmapsInterval; 0 reads it on every Read.
func WithSmapsInterval(d time.Duration) Option { return func(c *config) { c.smapsEvery = d } }

// WithCPULoadInterval re-reads the CPU contention files (SourceCPULoad) at
// most every d and carries the last values forward in between. Reading
// /proc/loadavg and /proc/pressure/cpu costs 10-20 µs each on a busy 2-core
// machine, twice the rest of a Read, and the kernel refreshes the PSI
// averages only every 2 s. Default DefaultCPULoadInterval; 0 reads them on
// every Read.
func WithCPULoadInterval(d time.Duration) Option { return func(c *config) { c.cpuEvery = d } }

// DefaultCPULoadInterval is how often a Reader re-reads the CPU contention
// files by default: at every reading of a Sampler at its DefaultInterval,
// so that CPUBusy spans last about one interval (250 ms made them 400 ms
// long, two intervals, and a hog that left was seen up to 800 ms later).
const DefaultCPULoadInterval = 200 * time.Millisecond

// WithThermalZoneTypes keeps only the thermal zones whose type is in types
// (e.g. "skin-therm", "cpu-0-0-usr"); by default all zones are read.
func WithThermalZoneTypes(types ...string) Option {
	return func(c *config) {
		set := make(map[string]bool, len(types))
		for _, t := range types {
			set[t] = true
		}
		c.keepThermal = func(t string) bool { return set[t] }
	}
}

// DefaultSmapsInterval is how often a Reader re-reads smaps_rollup by default.
const DefaultSmapsInterval = time.Second

// smapsCostDiv bounds the time spent reading smaps_rollup to 1/smapsCostDiv
// of the time (0.01%): the next read waits at least smapsCostDiv times as
// long as the last one took, when that is longer than the interval. The
// page-table walk grows with the resident size (a 560 MiB model: about 4
// ms, 0.4% of a core at one read a second), and with a policy asked every
// decode step it was the largest single item of the per-step path's CPU
// samples (~10%, stories260K under perf, at 1/1000). maxSmapsStretch caps
// the wait at that many intervals, so PSS is never staler than that; RSS
// (statm) stays fresh on every Read.
const (
	smapsCostDiv    = 10000
	maxSmapsStretch = 10
)

// smapsWait is the wait before the next smaps_rollup read, after one that
// took cost, with the configured interval every.
func smapsWait(every, cost time.Duration) time.Duration {
	return min(max(every, smapsCostDiv*cost), maxSmapsStretch*every)
}

// scratchSize bounds one kernel file read; /proc/meminfo is about 1.5 KiB.
const scratchSize = 16 << 10

// Reader reads the device's memory, pressure, thermal, power and CPU
// frequency sensors from the kernel's files. It opens every file once in
// NewReader and re-reads it in place on every Read, so a Read makes no system
// call other than pread and does not allocate.
//
// A Reader is not safe for concurrent use (it owns one scratch buffer); use
// one per goroutine, or a Sampler.
type Reader struct {
	cfg     config
	buf     []byte
	meminfo kfile
	psi     kfile
	smaps   kfile
	statm   kfile
	cgroup  cgroupFiles
	thermal thermalFiles
	power   powerFiles
	cpufreq cpufreqFiles
	cpuPSI  kfile
	loadavg kfile
	cpuset  kfile // the cgroup's cpuset.cpus.effective (v2)
	stat    kfile // /proc/stat, for CPUBusy
	selfCPU kfile // /proc/PID/stat of a WithPID process (else getrusage)

	cpuBase   cpuSample // the start of the current CPUBusy span
	lastSmaps Smaps     // for WithSmapsInterval
	smapsDue  time.Time // when smaps_rollup is next read
	lastCPU   Snapshot  // CPUPSI, Runnable, Allowed, CPUBusy, for WithCPULoadInterval
	cpuDue    time.Time // when the CPU contention files are next read
}

// NewReader finds and opens the sensor files. A sensor whose files do not
// exist is not an error: its readings report Present == false. The only
// error is a root that is not a directory. Close the Reader when done.
func NewReader(opts ...Option) (*Reader, error) {
	cfg := config{root: "/", sources: SourceAll, smapsEvery: DefaultSmapsInterval, cpuEvery: DefaultCPULoadInterval}
	for _, o := range opts {
		o(&cfg)
	}
	if st, err := os.Stat(cfg.root); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("sensors: root %s is not a directory", cfg.root)
	}
	r := &Reader{cfg: cfg, buf: make([]byte, scratchSize)}
	proc := filepath.Join(cfg.root, "proc", "self")
	if cfg.pid > 0 {
		proc = filepath.Join(cfg.root, "proc", strconv.Itoa(cfg.pid))
	}
	path := func(p string) string { return filepath.Join(cfg.root, p) }
	if cfg.sources&SourceMeminfo != 0 {
		r.meminfo = openKFile(path("proc/meminfo"))
	}
	if cfg.sources&SourcePSI != 0 {
		r.psi = openKFile(path("proc/pressure/memory"))
	}
	if cfg.sources&SourceSmaps != 0 {
		r.smaps = openKFile(filepath.Join(proc, "smaps_rollup"))
	}
	if cfg.sources&SourceStatm != 0 {
		r.statm = openKFile(filepath.Join(proc, "statm"))
	}
	if cfg.sources&SourceCgroup != 0 {
		r.cgroup = openCgroup(cfg.root, proc)
	}
	if cfg.sources&SourceThermal != 0 {
		r.thermal = openThermal(path("sys/class/thermal"), cfg.keepThermal)
	}
	if cfg.sources&SourcePower != 0 {
		r.power = openPower(path("sys/class/power_supply"))
	}
	if cfg.sources&SourceCPUFreq != 0 {
		r.cpufreq = openCPUFreq(path("sys/devices/system/cpu"))
	}
	if cfg.sources&SourceCPULoad != 0 {
		r.cpuPSI = openKFile(path(cpuPSIPath))
		r.loadavg = openKFile(path("proc/loadavg"))
		r.stat = openKFile(path("proc/stat"))
		if cfg.pid > 0 {
			r.selfCPU = openKFile(filepath.Join(proc, "stat"))
		}
		if r.cgroup.version == 2 {
			r.cpuset = openKFile(filepath.Join(r.cgroup.dir, "cpuset.cpus.effective"))
		}
	}
	return r, nil
}

// Close closes every file the Reader holds. It is safe to call twice.
func (r *Reader) Close() error {
	r.meminfo.close()
	r.psi.close()
	r.smaps.close()
	r.statm.close()
	r.cgroup.close()
	r.thermal.close()
	r.power.close()
	r.cpufreq.close()
	r.cpuPSI.close()
	r.stat.close()
	r.selfCPU.close()
	r.loadavg.close()
	r.cpuset.close()
	return nil
}

// Read takes a reading of every sensor into s (every field is overwritten).
// It does not allocate.
func (r *Reader) Read(s *Snapshot) {
	s.Time = time.Now()
	buf := r.buf
	// Memory first: the readings a policy acts on fastest.
	s.Mem = Meminfo{}
	if b, ok := r.meminfo.read(buf); ok {
		parseMeminfo(b, &s.Mem)
	}
	s.PSI = PSI{}
	if b, ok := r.psi.read(buf); ok {
		parsePSI(b, &s.PSI)
	}
	r.cgroup.read(buf, &s.Cgroup)
	s.Statm = Statm{}
	if b, ok := r.statm.read(buf); ok {
		parseStatm(b, pageSize, &s.Statm)
	}
	if r.cfg.smapsEvery > 0 && s.Time.Before(r.smapsDue) {
		s.Smaps = r.lastSmaps
	} else {
		s.Smaps = Smaps{}
		if b, ok := r.smaps.read(buf); ok {
			parseSmapsRollup(b, &s.Smaps)
			s.Smaps.Time = s.Time
		}
		r.lastSmaps, r.smapsDue = s.Smaps, s.Time.Add(smapsWait(r.cfg.smapsEvery, time.Since(s.Time)))
	}
	r.thermal.read(buf, &s.Thermal)
	r.power.read(buf, &s.Power)
	r.cpufreq.read(buf, &s.CPU)
	r.readCPULoad(buf, s)
}

// invalidateCPULoad makes the next Read re-read the CPU contention files
// whatever WithCPULoadInterval says (Sampler.Invalidate).
func (r *Reader) invalidateCPULoad() { r.cpuDue = time.Time{} }

// readCPULoad reads CPU contention: pressure, the run queue, the CPUs
// this process may use and CPU use over the last span.
func (r *Reader) readCPULoad(buf []byte, s *Snapshot) {
	s.CPUPSI, s.Runnable, s.Allowed, s.CPUBusy = PSI{}, Runnable{}, CPUAllowed{}, CPUBusy{}
	if r.cfg.sources&SourceCPULoad == 0 {
		return
	}
	if r.cfg.cpuEvery > 0 && s.Time.Before(r.cpuDue) {
		s.CPUPSI, s.Runnable, s.Allowed, s.CPUBusy = r.lastCPU.CPUPSI, r.lastCPU.Runnable, r.lastCPU.Allowed, r.lastCPU.CPUBusy
		return
	}
	if b, ok := r.cpuPSI.read(buf); ok {
		parsePSI(b, &s.CPUPSI)
	}
	if b, ok := r.loadavg.read(buf); ok {
		parseLoadavg(b, &s.Runnable)
	}
	cs, ok := r.cpuset.read(buf)
	if !ok {
		cs = nil
	}
	readCPUAllowed(cs, &s.Allowed)
	r.readCPUBusy(buf, s)
	r.lastCPU.CPUPSI, r.lastCPU.Runnable, r.lastCPU.Allowed, r.lastCPU.CPUBusy = s.CPUPSI, s.Runnable, s.Allowed, s.CPUBusy
	r.cpuDue = s.Time.Add(r.cfg.cpuEvery)
}

// readCPUBusy ends the CPUBusy span at s.Time when it has lasted MinCPUSpan
// and starts the next; a sooner reading repeats the last span's values.
func (r *Reader) readCPUBusy(buf []byte, s *Snapshot) {
	cur := cpuSample{t: s.Time, mask: s.Allowed.Mask}
	if b, ok := r.stat.read(buf); ok && s.Allowed.Present {
		cur.busy, cur.ok = parseProcStat(b, cur.mask)
	}
	if r.cfg.pid > 0 {
		b, ok := r.selfCPU.read(buf)
		var ticks uint64
		if ok {
			ticks, ok = cputime.StatTicks(b)
		}
		cur.ok = cur.ok && ok
		cur.self = time.Duration(ticks) * cputime.TaskTick
	} else {
		cur.self = cputime.Process()
	}
	if s.CPUPSI.Present && s.CPUPSI.Some.Present {
		cur.psi, cur.psiOK = s.CPUPSI.Some.TotalUS, true
	}
	if !cur.ok {
		r.cpuBase = cpuSample{}
		return
	}
	if r.cpuBase.ok && cur.t.Sub(r.cpuBase.t) < MinCPUSpan {
		s.CPUBusy = r.cpuBase.result
		return
	}
	cur.result, _ = cpuBusySpan(&r.cpuBase, &cur)
	r.cpuBase = cur
	s.CPUBusy = cur.result
}

// Describe lists what the Reader found, one line per sensor group, for logs
// and `edgellm trace record`. It allocates; call it once.
func (r *Reader) Describe() []string {
	yes := func(f kfile) string {
		if f.ok() {
			return "yes"
		}
		return "absent"
	}
	cg := "absent"
	if r.cgroup.usage.ok() {
		cg = fmt.Sprintf("v%d %s", r.cgroup.version, r.cgroup.dir)
	}
	return []string{
		"meminfo: " + yes(r.meminfo),
		"psi memory: " + yes(r.psi),
		"smaps_rollup: " + yes(r.smaps),
		"statm: " + yes(r.statm),
		"memory cgroup: " + cg,
		fmt.Sprintf("thermal zones: %d", len(r.thermal.zones)),
		fmt.Sprintf("power supplies: %d", len(r.power.supplies)),
		fmt.Sprintf("cpufreq cores: %d", len(r.cpufreq.cur)),
		"cpu busy (/proc/stat): " + yes(r.stat),
	}
}
