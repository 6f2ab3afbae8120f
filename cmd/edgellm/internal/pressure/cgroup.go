//go:build linux

package pressure

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edgellm/edgellm/host/sensors"
)

// ErrUnavailable is wrapped by every error that means "cgroups cannot be
// used here" (no memory controller, read-only cgroupfs, no permission).
// Callers fall back to trace-only pressure and label it simulated.
var ErrUnavailable = errors.New("cgroups unavailable: use trace-only (simulated) pressure")

// UnavailableError says why cgroups cannot be used.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string {
	return "pressure: cannot use cgroups: " + e.Reason + " (fall back to trace-only pressure, labelled simulated)"
}
func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

// Cgroup is a cgroup created for one scenario run, with a memory controller
// and, when the machine has one, a CPU controller. On cgroup v2 it is one
// directory; on v1 (and hybrid systems) one directory per controller
// hierarchy. Close kills what is left inside and removes the directories.
type Cgroup struct {
	Name    string
	Version int    // 1 or 2
	MemDir  string // the memory controller's directory
	CPUDir  string // the cpu controller's directory ("" if none)

	dirs []string // created directories, removed by Close
}

// Prefix of every cgroup directory this package creates. The directory is
// edgellm-NAME-NS-PID: NS is the inode of the creator's pid namespace and
// PID its pid there, so a stale one is recognised only by a process of the
// same namespace (a pid from another container means nothing here).
const dirPrefix = "edgellm-"

// pidNS is the inode number of this process's pid namespace ("0" if unknown).
func pidNS() string {
	l, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "0"
	}
	l = strings.TrimSuffix(strings.TrimPrefix(l, "pid:["), "]")
	if _, err := strconv.ParseUint(l, 10, 64); err != nil {
		return "0"
	}
	return l
}

// NewCgroup creates a child cgroup named edgellm-NAME-NS-PID under the
// calling process's own cgroup (v2 falls back to the root, see
// cgroupFS.discover). It first removes stale cgroups of this package whose
// owning process is gone (left by a SIGKILLed runner). A machine where
// cgroups cannot be written gives an *UnavailableError.
func NewCgroup(name string) (*Cgroup, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("pressure: bad cgroup name %q", name)
	}
	fs, err := hostCgroupFS()
	if err != nil {
		return nil, err
	}
	return fs.newCgroup(name)
}

// newCgroup is NewCgroup in the view fs; name is already checked.
func (fs cgroupFS) newCgroup(name string) (*Cgroup, error) {
	h, err := fs.discover()
	if err != nil {
		return nil, err
	}
	ns := pidNS()
	dirName := fmt.Sprintf("%s%s-%s-%d", dirPrefix, name, ns, os.Getpid())
	c := &Cgroup{Name: name, Version: h.version}
	mk := func(parent string) (string, error) {
		sweepStale(parent, ns)
		d := filepath.Join(parent, dirName)
		if err := fs.mkdir(d); err != nil {
			if errors.Is(err, os.ErrExist) {
				return "", fmt.Errorf("pressure: cgroup %s already exists", d)
			}
			return "", &UnavailableError{Reason: fmt.Sprintf("mkdir %s: %v", d, err)}
		}
		c.dirs = append(c.dirs, d)
		return d, nil
	}
	if c.MemDir, err = mk(h.memParent); err != nil {
		c.Close()
		return nil, err
	}
	switch {
	case h.version == 2:
		c.CPUDir = "" // set below if the cpu controller is enabled
		if h.cpu {
			c.CPUDir = c.MemDir
		}
	case h.cpuParent != "":
		if c.CPUDir, err = mk(h.cpuParent); err != nil {
			c.CPUDir = "" // memory alone is still useful
		}
	}
	// No swap escape: a limit must mean reclaim or OOM, not swapping.
	if h.version == 2 {
		writeFile(filepath.Join(c.MemDir, "memory.swap.max"), "0")
	} else {
		writeFile(filepath.Join(c.MemDir, "memory.move_charge_at_immigrate"), "3") // deprecated, best effort
	}
	return c, nil
}

// SetMemoryLimit sets the hard memory limit (memory.max / memory.limit_in_bytes).
func (c *Cgroup) SetMemoryLimit(bytes int64) error {
	if bytes <= 0 {
		return fmt.Errorf("pressure: memory limit %d bytes must be > 0", bytes)
	}
	if c.Version == 2 {
		return writeFile(filepath.Join(c.MemDir, "memory.max"), strconv.FormatInt(bytes, 10))
	}
	err := writeFile(filepath.Join(c.MemDir, "memory.limit_in_bytes"), strconv.FormatInt(bytes, 10))
	if err == nil { // memory+swap as well when swap accounting is on
		writeFile(filepath.Join(c.MemDir, "memory.memsw.limit_in_bytes"), strconv.FormatInt(bytes, 10))
	}
	return err
}

// RemoveMemoryLimit lifts the memory limit.
func (c *Cgroup) RemoveMemoryLimit() error {
	if c.Version == 2 {
		return writeFile(filepath.Join(c.MemDir, "memory.max"), "max")
	}
	writeFile(filepath.Join(c.MemDir, "memory.memsw.limit_in_bytes"), "-1")
	return writeFile(filepath.Join(c.MemDir, "memory.limit_in_bytes"), "-1")
}

// cpuPeriodUS is the CFS period used for quotas.
const cpuPeriodUS = 100000

// maxCPUQuotaUS is the largest quota the kernel accepts (max_cfs_runtime in
// kernel/sched/core.c: 2^44-1 µs; more gives EINVAL).
const maxCPUQuotaUS = 1<<44 - 1

// SetCPUQuota limits the cgroup to cpus CPUs' worth of time (0.5 = half of
// one core per period, 2 = two cores), through cpu.max (v2) or
// cpu.cfs_quota_us (v1), with a 100 ms period.
func (c *Cgroup) SetCPUQuota(cpus float64) error {
	if c.CPUDir == "" {
		return &UnavailableError{Reason: "no cpu controller for " + c.MemDir}
	}
	if !(cpus > 0) || cpus*cpuPeriodUS > maxCPUQuotaUS {
		return fmt.Errorf("pressure: CPU quota %v must be > 0 and at most %d CPUs", cpus, maxCPUQuotaUS/cpuPeriodUS)
	}
	// Rounded: 0.29*100000 is 28999.999… in float64.
	quota := max(int64(math.Round(cpus*cpuPeriodUS)), 1000) // the kernel's minimum is 1 ms
	if c.Version == 2 {
		return writeFile(filepath.Join(c.CPUDir, "cpu.max"), fmt.Sprintf("%d %d", quota, cpuPeriodUS))
	}
	if err := writeFile(filepath.Join(c.CPUDir, "cpu.cfs_period_us"), strconv.Itoa(cpuPeriodUS)); err != nil {
		return err
	}
	return writeFile(filepath.Join(c.CPUDir, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10))
}

// RemoveCPUQuota lifts the CPU quota.
func (c *Cgroup) RemoveCPUQuota() error {
	if c.CPUDir == "" {
		return nil
	}
	if c.Version == 2 {
		return writeFile(filepath.Join(c.CPUDir, "cpu.max"), fmt.Sprintf("max %d", cpuPeriodUS))
	}
	return writeFile(filepath.Join(c.CPUDir, "cpu.cfs_quota_us"), "-1")
}

// AddProcess moves pid (all its threads) into the cgroup's directories.
func (c *Cgroup) AddProcess(pid int) error {
	for _, d := range c.controllerDirs() {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cgroup) controllerDirs() []string {
	if c.CPUDir == "" || c.CPUDir == c.MemDir {
		return []string{c.MemDir}
	}
	return []string{c.MemDir, c.CPUDir}
}

// Start starts cmd inside the cgroup. On v2 the child is cloned straight
// into it (CLONE_INTO_CGROUP); on v1 it is moved in right after it starts,
// so its first instructions run outside (memory it touched by then is moved
// with it where move_charge_at_immigrate works). Processes that must not
// allocate before being inside wait for a go-ahead, as the Hog does.
func (c *Cgroup) Start(cmd *exec.Cmd) error {
	if c.Version == 2 {
		fd, err := syscall.Open(c.MemDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("pressure: open %s: %w", c.MemDir, err)
		}
		defer syscall.Close(fd)
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		return cmd.Start()
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := c.AddProcess(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	return nil
}

// Procs lists the processes in the cgroup (all controller directories).
func (c *Cgroup) Procs() ([]int, error) {
	seen := map[int]bool{}
	var pids []int
	for _, d := range c.controllerDirs() {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			return pids, err
		}
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil && !seen[p] {
				seen[p] = true
				pids = append(pids, p)
			}
		}
	}
	return pids, nil
}

// Events reads the memory event counters (oom_kill above all).
func (c *Cgroup) Events() (sensors.MemoryEvents, error) {
	var e sensors.MemoryEvents
	name := "memory.events"
	if c.Version == 1 {
		name = "memory.oom_control"
	}
	b, err := os.ReadFile(filepath.Join(c.MemDir, name))
	if err != nil {
		return e, fmt.Errorf("pressure: %w", err)
	}
	sensors.ParseMemoryEvents(b, &e)
	if c.Version == 1 {
		if b, err := os.ReadFile(filepath.Join(c.MemDir, "memory.failcnt")); err == nil {
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
				e.Max = v
			}
		}
	}
	return e, nil
}

// MemoryUsage is the memory charged to the cgroup, in bytes.
func (c *Cgroup) MemoryUsage() (int64, error) {
	name := "memory.current"
	if c.Version == 1 {
		name = "memory.usage_in_bytes"
	}
	b, err := os.ReadFile(filepath.Join(c.MemDir, name))
	if err != nil {
		return 0, fmt.Errorf("pressure: %w", err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// CPUStat is CFS bandwidth statistics: periods, periods throttled and the
// time throttled.
type CPUStat struct {
	Periods, Throttled uint64
	ThrottledTime      time.Duration
}

// CPUStats reads cpu.stat.
func (c *Cgroup) CPUStats() (CPUStat, error) {
	var st CPUStat
	if c.CPUDir == "" {
		return st, &UnavailableError{Reason: "no cpu controller"}
	}
	b, err := os.ReadFile(filepath.Join(c.CPUDir, "cpu.stat"))
	if err != nil {
		return st, fmt.Errorf("pressure: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch k {
		case "nr_periods":
			st.Periods = n
		case "nr_throttled":
			st.Throttled = n
		case "throttled_usec": // v2
			st.ThrottledTime = time.Duration(n) * time.Microsecond
		case "throttled_time": // v1, ns
			st.ThrottledTime = time.Duration(n)
		}
	}
	return st, nil
}

// Close kills every process left in the cgroup, waits for them to leave and
// removes the directories. It is safe to call more than once; the error
// names a directory that could not be removed.
func (c *Cgroup) Close() error {
	if len(c.dirs) == 0 {
		return nil
	}
	err := removeCgroupDirs(c.dirs)
	c.dirs = nil
	return err
}

// removeCgroupDirs kills the processes in dirs and removes them.
func removeCgroupDirs(dirs []string) error {
	deadline := time.Now().Add(5 * time.Second)
	var firstErr error
	for _, d := range dirs {
		writeFile(filepath.Join(d, "cgroup.kill"), "1") // v2 (5.14+): kill all at once
		for {
			pids := readPids(d)
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if time.Now().After(deadline) {
				if firstErr == nil {
					firstErr = fmt.Errorf("pressure: remove cgroup %s: %v (processes %v)", d, err, pids)
				}
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return firstErr
}

func readPids(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// sweepStale removes cgroups this package created under parent from pid
// namespace ns whose owning process no longer exists.
func sweepStale(parent, ns string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() || !strings.HasPrefix(n, dirPrefix) {
			continue
		}
		f := strings.Split(n, "-")
		if len(f) < 4 || f[len(f)-2] != ns || ns == "0" {
			continue
		}
		pid, err := strconv.Atoi(f[len(f)-1])
		if err != nil || pid <= 0 || pidAlive(pid) {
			continue
		}
		removeCgroupDirs([]string{filepath.Join(parent, n)})
	}
}

func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func writeFile(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pressure: %w", err)
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pressure: write %q to %s: %w", v, path, err)
	}
	return nil
}
