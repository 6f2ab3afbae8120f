//go:build linux

package pressure

// Tests of the cgroup v2 branches against a temp-dir tree laid out like a
// cgroup v2 mount, NOT against a v2 kernel (this machine and CI are v1).
// They prove which files are chosen and which bytes are written or parsed.
// They do not prove kernel semantics: that the writes are accepted, that the
// no-internal-process rule bites where we expect, that CLONE_INTO_CGROUP
// places the child, or that the counters move. See RATIONALE.md.

import (
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/sensors"
)

// The mount point of the fake unified hierarchy, below the tree's root.
const v2Mount = "/sys/fs/cgroup"

// mountinfo lines as a v2-only and a hybrid system print them.
const (
	miRootfs  = "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/root rw\n"
	miV2      = "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	miHybrid  = "26 22 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n" + "27 26 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate\n" + "31 26 0:28 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory\n" + "32 26 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct\n"
	miDocker  = "30 22 0:26 /system.slice/docker-abc.scope /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n"
	allCtl    = "cpuset cpu io memory pids\n"
	ownScope  = "0::/user.slice/x.scope\n"
	enableAll = "+memory +cpu"
)

// put writes a fake interface file (creating its directory).
func put(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// read returns a fake file's bytes ("<missing>" if absent).
func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// v2Level makes dir a cgroup of the fake tree: the core files with the
// given controllers available and subtree_control as given. A subtree_control
// of "<dir>" is a directory, so that writes to it fail even for root (a
// read-only mode would not stop root, who runs these tests).
func v2Level(t *testing.T, dir, controllers, subtree string) {
	t.Helper()
	put(t, filepath.Join(dir, "cgroup.controllers"), controllers)
	put(t, filepath.Join(dir, "cgroup.procs"), "")
	sc := filepath.Join(dir, "cgroup.subtree_control")
	if subtree == "<dir>" {
		if err := os.MkdirAll(sc, 0o755); err != nil {
			t.Fatal(err)
		}
		return
	}
	put(t, sc, subtree)
}

// v2InterfaceFiles are the files the kernel creates in a new cgroup whose
// parent enabled memory and cpu. They start empty so that a test reads
// exactly the bytes written (a real interface file is parsed per write(2);
// the fake keeps the bytes).
var v2InterfaceFiles = []string{
	"cgroup.controllers", "cgroup.subtree_control", "cgroup.procs", "cgroup.kill", "cgroup.events",
	"memory.max", "memory.high", "memory.swap.max", "memory.current", "memory.events", "memory.stat",
	"cpu.max", "cpu.stat", "cpu.weight",
}

// kernelMkdir stands in for mkdir(2) on cgroupfs: it makes the directory
// and the interface files in it.
func kernelMkdir(t *testing.T) func(string) error {
	return func(dir string) error {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		for _, n := range v2InterfaceFiles {
			put(t, filepath.Join(dir, n), "")
		}
		return nil
	}
}

// snapshot is every regular file under dir with its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			m[rel] = read(t, p)
		}
		return nil
	})
	return m
}

// changed lists the files whose content differs between two snapshots.
func changed(before, after map[string]string) map[string]string {
	d := map[string]string{}
	for k, v := range after {
		if before[k] != v {
			d[k] = v
		}
	}
	return d
}

func TestV2Discover(t *testing.T) {
	tests := []struct {
		name       string
		mountinfo  string
		procCgroup string
		setup      func(t *testing.T, root string) // the tree below root
		want       hierarchy                       // paths relative to root
		// cpuUnknown: the parent's subtree_control was written here; the
		// kernel would read back "cpu memory", the fake keeps "+memory
		// +cpu", so want.cpu is not checked.
		cpuUnknown bool
		wantErr    bool
		// subtree_control bytes after discover, by path below root;
		// a path not listed must keep its setup content.
		wantWrites map[string]string
	}{
		{
			name: "own cgroup, enabled top-down", mountinfo: miRootfs + miV2, procCgroup: ownScope,
			setup: func(t *testing.T, root string) {
				v2Level(t, root+v2Mount, allCtl, "")
				v2Level(t, root+v2Mount+"/user.slice", "", "")
				v2Level(t, root+v2Mount+"/user.slice/x.scope", "", "")
			},
			want: hierarchy{version: 2, memParent: v2Mount + "/user.slice/x.scope"}, cpuUnknown: true,
			wantWrites: map[string]string{
				v2Mount + "/cgroup.subtree_control":                    enableAll,
				v2Mount + "/user.slice/cgroup.subtree_control":         enableAll,
				v2Mount + "/user.slice/x.scope/cgroup.subtree_control": enableAll,
			},
		},
		{
			name: "already enabled (delegated): nothing written, cpu seen", mountinfo: miRootfs + miV2, procCgroup: ownScope,
			setup: func(t *testing.T, root string) {
				v2Level(t, root+v2Mount, allCtl, "cpu io memory pids\n")
				v2Level(t, root+v2Mount+"/user.slice", "cpu io memory pids\n", "cpu memory\n")
				v2Level(t, root+v2Mount+"/user.slice/x.scope", "cpu memory\n", "memory cpu\n")
			},
			want: hierarchy{version: 2, memParent: v2Mount + "/user.slice/x.scope", cpu: true},
		},
		{
			name: "enabled above, only the own level written", mountinfo: miRootfs + miV2, procCgroup: ownScope,
			setup: func(t *testing.T, root string) {
				v2Level(t, root+v2Mount, allCtl, "cpu memory\n")
				v2Level(t, root+v2Mount+"/user.slice", "cpu memory\n", "memory cpu pids\n")
				v2Level(t, root+v2Mount+"/user.slice/x.scope", "cpu memory\n", "")
			},
			want: hierarchy{version: 2, memParent: v2Mount + "/user.slice/x.scope"}, cpuUnknown: true,
			wantWrites: map[string]string{
				v2Mount + "/user.slice/x.scope/cgroup.subtree_control": enableAll,
			},
		},
		{
			name: "no cpu controller: +memory only", mountinfo: miRootfs + miV2, procCgroup: ownScope,
			setup: func(t *testing.T, root string) {
				v2Level(t, root+v2Mount, "memory pids\n", "")
				v2Level(t, root+v2Mount+"/user.slice", "", "")
				v2Level(t, root+v2Mount+"/user.slice/x.scope", "", "")
			},
			want: hierarchy{version: 2, memParent: v2Mount + "/user.slice/x.scope"},
			wantWrites: map[string]string{
				v2Mount + "/cgroup.subtree_control":                    "+memory",
				v2Mount + "/user.slice/cgroup.subtree_control":         "+memory",
				v2Mount + "/user.slice/x.scope/cgroup.subtree_control": "+memory",
			},
		},
		{
			// The own cgroup holds our process: the kernel refuses
			// (EBUSY); the fake refuses because the file is a directory.
			name: "own level refused: falls back to the root", mountinfo: miRootfs + miV2, procCgroup: ownScope,
			setup: func(t *testing.T, root string) {
				v2Level(t, root+v2Mount, allCtl, "")
				v2Level(t, root+v2Mount+"/user.slice", "", "")
				v2Level(t, root+v2Mount+"/user.slice/x.scope", "", "<dir>")
			},
			want: hierarchy{version: 2, memParent: v2Mount}, cpuUnknown: true,
			wantWrites: map[string]string{
				v2Mount + "/cgroup.subtree_control":            enableAll,
				v2Mount + "/user.slice/cgroup.subtree_control": enableAll, // by the first attempt
			},
		},
		{
			// Top-down: the walk stops at the refused middle level, so
			// the own level below it is never written.
			name: "middle level refused: own untouched, root used", mountinfo: miRootfs + miV2, procCgroup: ownScope,
			setup: func(t *testing.T, root string) {
				v2Level(t, root+v2Mount, allCtl, "")
				v2Level(t, root+v2Mount+"/user.slice", "", "<dir>")
				v2Level(t, root+v2Mount+"/user.slice/x.scope", "", "")
			},
			want: hierarchy{version: 2, memParent: v2Mount}, cpuUnknown: true,
			wantWrites: map[string]string{
				v2Mount + "/cgroup.subtree_control": enableAll,
			},
		},
		{
			name: "process in the root cgroup", mountinfo: miRootfs + miV2, procCgroup: "0::/\n",
			setup: func(t *testing.T, root string) { v2Level(t, root+v2Mount, allCtl, "") },
			want:  hierarchy{version: 2, memParent: v2Mount}, cpuUnknown: true,
			wantWrites: map[string]string{
				v2Mount + "/cgroup.subtree_control": enableAll,
			},
		},
		{
			// Docker without a cgroup namespace: the mount's root is the
			// container's cgroup, /proc/self/cgroup names the full path.
			name: "mount root below the hierarchy root", mountinfo: miRootfs + miDocker,
			procCgroup: "0::/system.slice/docker-abc.scope/app\n",
			setup: func(t *testing.T, root string) {
				v2Level(t, root+v2Mount, allCtl, "")
				v2Level(t, root+v2Mount+"/app", "", "")
			},
			want: hierarchy{version: 2, memParent: v2Mount + "/app"}, cpuUnknown: true,
			wantWrites: map[string]string{
				v2Mount + "/cgroup.subtree_control":     enableAll,
				v2Mount + "/app/cgroup.subtree_control": enableAll,
			},
		},
		{
			name: "neither own nor root can enable memory", mountinfo: miRootfs + miV2, procCgroup: ownScope,
			setup: func(t *testing.T, root string) {
				v2Level(t, root+v2Mount, allCtl, "<dir>")
				v2Level(t, root+v2Mount+"/user.slice", "", "")
				v2Level(t, root+v2Mount+"/user.slice/x.scope", "", "")
			},
			wantErr: true,
		},
		{
			// Hybrid: the unified mount has no controllers (all are bound
			// to v1), so v1 is chosen and nothing is written to v2.
			name: "hybrid, memory only in v1", mountinfo: miRootfs + miHybrid,
			procCgroup: "12:memory:/user.slice\n4:cpu,cpuacct:/user.slice/x\n1:name=systemd:/user.slice/x.scope\n0::/user.slice/x.scope\n",
			setup: func(t *testing.T, root string) {
				v2Level(t, root+"/sys/fs/cgroup/unified", "", "")
				v2Level(t, root+"/sys/fs/cgroup/unified/user.slice/x.scope", "", "")
			},
			want: hierarchy{version: 1, memParent: "/sys/fs/cgroup/memory/user.slice", cpuParent: "/sys/fs/cgroup/cpu,cpuacct/user.slice/x"},
		},
		{
			name: "v2 without memory and no v1 memory", mountinfo: miRootfs + miV2, procCgroup: ownScope,
			setup: func(t *testing.T, root string) {
				v2Level(t, root+v2Mount, "cpu io pids\n", "")
				v2Level(t, root+v2Mount+"/user.slice/x.scope", "", "")
			},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.setup(t, root)
			before := snapshot(t, root)
			h, err := cgroupFS{mountinfo: tc.mountinfo, procCgroup: tc.procCgroup, root: root}.discover()
			if tc.wantErr {
				var ue *UnavailableError
				if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ue) {
					t.Fatalf("discover = %+v, %v; want an *UnavailableError", h, err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !tc.wantErr {
				want := tc.want
				want.memParent = filepath.Join(root, want.memParent)
				if want.cpuParent != "" {
					want.cpuParent = filepath.Join(root, want.cpuParent)
				}
				if tc.cpuUnknown {
					want.cpu = h.cpu
				}
				if h != want {
					t.Errorf("hierarchy %+v\nwant      %+v", h, want)
				}
			}
			got := changed(before, snapshot(t, root))
			want := map[string]string{}
			for k, v := range tc.wantWrites {
				want[strings.TrimPrefix(k, "/")] = v
			}
			if !equalMaps(got, want) {
				t.Errorf("files written %v\nwant          %v", got, want)
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// newFakeV2 creates a Cgroup through NewCgroup's own code on a fake tree
// whose root and own cgroup already have memory and cpu enabled.
func newFakeV2(t *testing.T, name string) (*Cgroup, string) {
	t.Helper()
	root := t.TempDir()
	v2Level(t, root+v2Mount, allCtl, "cpu io memory pids\n")
	v2Level(t, root+v2Mount+"/user.slice", allCtl, "cpu memory\n")
	v2Level(t, root+v2Mount+"/user.slice/x.scope", "cpu memory\n", "cpu memory\n")
	fs := cgroupFS{mountinfo: miRootfs + miV2, procCgroup: ownScope, root: root, mkdir: kernelMkdir(t)}
	c, err := fs.newCgroup(name)
	if err != nil {
		t.Fatal(err)
	}
	return c, root
}

func TestV2NewCgroup(t *testing.T) {
	c, root := newFakeV2(t, "fake")
	parent := root + v2Mount + "/user.slice/x.scope"
	if c.Version != 2 || filepath.Dir(c.MemDir) != parent || c.CPUDir != c.MemDir {
		t.Errorf("cgroup %+v, want v2 under %s with CPUDir == MemDir", c, parent)
	}
	if want := dirPrefix + "fake-" + pidNS() + "-"; !strings.HasPrefix(filepath.Base(c.MemDir), want) {
		t.Errorf("directory %s, want %s<pid>", filepath.Base(c.MemDir), want)
	}
	if got := read(t, filepath.Join(c.MemDir, "memory.swap.max")); got != "0" {
		t.Errorf("memory.swap.max = %q, want \"0\" (no swap escape)", got)
	}
	if got := c.controllerDirs(); len(got) != 1 || got[0] != c.MemDir {
		t.Errorf("controller dirs %v, want one", got)
	}
	if _, err := os.Stat(filepath.Join(c.MemDir, "memory.move_charge_at_immigrate")); err == nil {
		t.Error("v1 file written on v2")
	}
	// Close would spin for its 5 s deadline: the fake directory is not
	// emptied by rmdir. TestV2Close covers it with a simulated kernel.
	c.dirs = nil

	// Parent without cpu for children: no CPUDir, SetCPUQuota unavailable.
	root = t.TempDir()
	v2Level(t, root+v2Mount, "memory pids\n", "memory\n")
	fs := cgroupFS{mountinfo: miRootfs + miV2, procCgroup: "0::/\n", root: root, mkdir: kernelMkdir(t)}
	c, err := fs.newCgroup("nocpu")
	if err != nil {
		t.Fatal(err)
	}
	c.dirs = nil
	if c.CPUDir != "" || !errors.Is(c.SetCPUQuota(0.5), ErrUnavailable) || c.RemoveCPUQuota() != nil {
		t.Errorf("without cpu: CPUDir %q, SetCPUQuota should be unavailable", c.CPUDir)
	}
	if _, err := c.CPUStats(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("CPUStats without cpu: %v", err)
	}

	// mkdir refused (EACCES on a real cgroupfs): unavailable.
	fs.mkdir = func(string) error { return syscall.EACCES }
	if _, err := fs.newCgroup("denied"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("mkdir refused: %v, want ErrUnavailable", err)
	}
}

// v2Cgroup is a Cgroup value on a fake v2 directory with empty interface
// files. It owns no directories, so Close touches nothing.
func v2Cgroup(t *testing.T) *Cgroup {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "edgellm-x")
	if err := kernelMkdir(t)(dir); err != nil {
		t.Fatal(err)
	}
	return &Cgroup{Name: "x", Version: 2, MemDir: dir, CPUDir: dir}
}

func TestV2LimitWrites(t *testing.T) {
	tests := []struct {
		name    string
		op      func(c *Cgroup) error
		file    string // the only file written ("" for none)
		want    string
		wantErr bool
	}{
		{"memory limit", func(c *Cgroup) error { return c.SetMemoryLimit(96 << 20) }, "memory.max", "100663296", false},
		{"memory limit 1 byte", func(c *Cgroup) error { return c.SetMemoryLimit(1) }, "memory.max", "1", false},
		{"remove memory limit", (*Cgroup).RemoveMemoryLimit, "memory.max", "max", false},
		{"memory limit 0", func(c *Cgroup) error { return c.SetMemoryLimit(0) }, "", "", true},
		{"cpu 0.12", func(c *Cgroup) error { return c.SetCPUQuota(0.12) }, "cpu.max", "12000 100000", false},
		{"cpu 0.29 rounds", func(c *Cgroup) error { return c.SetCPUQuota(0.29) }, "cpu.max", "29000 100000", false},
		{"cpu 2", func(c *Cgroup) error { return c.SetCPUQuota(2) }, "cpu.max", "200000 100000", false},
		{"cpu minimum 1 ms", func(c *Cgroup) error { return c.SetCPUQuota(0.001) }, "cpu.max", "1000 100000", false},
		{"cpu below minimum", func(c *Cgroup) error { return c.SetCPUQuota(1e-9) }, "cpu.max", "1000 100000", false},
		{"remove cpu quota", (*Cgroup).RemoveCPUQuota, "cpu.max", "max 100000", false},
		{"cpu 0", func(c *Cgroup) error { return c.SetCPUQuota(0) }, "", "", true},
		{"cpu negative", func(c *Cgroup) error { return c.SetCPUQuota(-1) }, "", "", true},
		{"cpu NaN", func(c *Cgroup) error { return c.SetCPUQuota(math.NaN()) }, "", "", true},
		{"cpu +Inf", func(c *Cgroup) error { return c.SetCPUQuota(math.Inf(1)) }, "", "", true},
		{"cpu beyond the kernel's maximum", func(c *Cgroup) error { return c.SetCPUQuota(1e300) }, "", "", true},
		{"add process", func(c *Cgroup) error { return c.AddProcess(4242) }, "cgroup.procs", "4242", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := v2Cgroup(t)
			before := snapshot(t, c.MemDir)
			err := tc.op(c)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			got := changed(before, snapshot(t, c.MemDir))
			want := map[string]string{}
			if tc.file != "" {
				want[tc.file] = tc.want
			}
			if !equalMaps(got, want) {
				t.Errorf("written %q, want %q", got, want)
			}
		})
	}
	// A missing interface file is an error naming it, not a silent no-op.
	c := v2Cgroup(t)
	os.Remove(filepath.Join(c.MemDir, "memory.max"))
	if err := c.SetMemoryLimit(1 << 20); err == nil || !strings.Contains(err.Error(), "memory.max") {
		t.Errorf("SetMemoryLimit without memory.max: %v", err)
	}
}

func TestV2Reads(t *testing.T) {
	c := v2Cgroup(t)
	put(t, filepath.Join(c.MemDir, "memory.events"), "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n")
	put(t, filepath.Join(c.MemDir, "memory.failcnt"), "99\n") // v1 only: must be ignored on v2
	put(t, filepath.Join(c.MemDir, "memory.current"), "104857600\n")
	put(t, filepath.Join(c.MemDir, "cpu.stat"), "usage_usec 8123456\nuser_usec 6000000\nsystem_usec 2123456\n"+
		"nr_periods 500\nnr_throttled 120\nthrottled_usec 3456789\nnr_bursts 0\nburst_usec 0\n")
	put(t, filepath.Join(c.MemDir, "cgroup.procs"), "4242\n4243\n")

	ev, err := c.Events()
	if want := (sensors.MemoryEvents{Present: true, Max: 12, OOM: 3, OOMKill: 2}); err != nil || ev != want {
		t.Errorf("Events = %+v, %v\nwant     %+v", ev, err, want)
	}
	if u, err := c.MemoryUsage(); err != nil || u != 100<<20 {
		t.Errorf("MemoryUsage = %d, %v; want %d", u, err, 100<<20)
	}
	st, err := c.CPUStats()
	if want := (CPUStat{Periods: 500, Throttled: 120, ThrottledTime: 3456789 * time.Microsecond}); err != nil || st != want {
		t.Errorf("CPUStats = %+v, %v\nwant       %+v", st, err, want)
	}
	if p, err := c.Procs(); err != nil || len(p) != 2 || p[0] != 4242 || p[1] != 4243 {
		t.Errorf("Procs = %v, %v", p, err)
	}

	// Missing files are errors, not zero readings.
	for _, n := range []string{"memory.events", "memory.current", "cpu.stat"} {
		os.Remove(filepath.Join(c.MemDir, n))
	}
	if _, err := c.Events(); err == nil {
		t.Error("Events without memory.events: no error")
	}
	if _, err := c.MemoryUsage(); err == nil {
		t.Error("MemoryUsage without memory.current: no error")
	}
	if _, err := c.CPUStats(); err == nil {
		t.Error("CPUStats without cpu.stat: no error")
	}
}

// TestV2StartAsksCloneIntoCgroup checks that Start on v2 asks for
// CLONE_INTO_CGROUP with a descriptor of the cgroup directory, and that a
// refused clone is an error rather than a process started outside. The
// kernel refuses here because the fake directory is not on cgroupfs; that
// the clone lands in the cgroup on a v2 kernel is NOT shown by this test.
func TestV2StartAsksCloneIntoCgroup(t *testing.T) {
	c := v2Cgroup(t)
	cmd := exec.Command("/bin/true")
	err := c.Start(cmd)
	if cmd.Process != nil {
		cmd.Wait()
	}
	if err == nil || cmd.Process != nil {
		t.Fatalf("Start into a non-cgroup directory: err %v, process %v; want an error and no process", err, cmd.Process)
	}
	if a := cmd.SysProcAttr; a == nil || !a.UseCgroupFD || a.CgroupFD <= 0 {
		t.Errorf("SysProcAttr %+v, want UseCgroupFD with a descriptor", a)
	}
	t.Logf("refused as expected on a non-cgroup directory: %v", err)

	c.MemDir = filepath.Join(t.TempDir(), "gone")
	if err := c.Start(exec.Command("/bin/true")); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("Start with a missing directory: %v", err)
	}
}

// TestV2Close checks that Close writes "1" to cgroup.kill before removing
// the directory. A goroutine plays the kernel: it reads cgroup.kill (a FIFO
// here) and then empties the directory, as the kernel's rmdir would after
// the kill. Until it has read the kill, rmdir fails (ENOTEMPTY).
func TestV2Close(t *testing.T) {
	c, _ := newFakeV2(t, "close")
	dir := c.MemDir
	kill := filepath.Join(dir, "cgroup.kill")
	os.Remove(kill)
	if err := syscall.Mkfifo(kill, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(kill) // blocks until Close opens it for writing
		if err != nil {
			got <- "<" + err.Error() + ">"
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
		got <- string(b)
	}()
	t.Cleanup(func() { // unblock the goroutine if Close never wrote
		if f, err := os.OpenFile(kill, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if k := <-got; k != "1" {
		t.Errorf("cgroup.kill got %q, want \"1\"", k)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after Close: %v", dir, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
