//go:build linux

package pressure

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// hierarchy is where this machine lets us create cgroups.
type hierarchy struct {
	version   int
	memParent string // directory to create the memory cgroup in
	cpuParent string // v1: directory to create the cpu cgroup in ("" if none)
	cpu       bool   // v2: the cpu controller is enabled for children
}

type mountEntry struct{ root, point, fstype, opts string }

// cgroupFS is the kernel's view that discovery and NewCgroup work from: the
// text of /proc/self/mountinfo and /proc/self/cgroup, a prefix put before
// every mount point ("" on the real system) and how a cgroup directory is
// made (on cgroupfs, mkdir also creates the directory's interface files).
// Tests point it at a temp-dir tree laid out like cgroupfs.
type cgroupFS struct {
	mountinfo, procCgroup string
	root                  string
	mkdir                 func(dir string) error
}

// hostCgroupFS is the calling process's view of the real system.
func hostCgroupFS() (cgroupFS, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return cgroupFS{}, &UnavailableError{Reason: "read /proc/self/mountinfo: " + err.Error()}
	}
	pc, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return cgroupFS{}, &UnavailableError{Reason: "read /proc/self/cgroup: " + err.Error()}
	}
	return cgroupFS{mountinfo: string(mi), procCgroup: string(pc),
		mkdir: func(d string) error { return os.Mkdir(d, 0o755) }}, nil
}

// discover finds the memory (and cpu) hierarchies of the calling process:
// cgroup v2 when its unified hierarchy has the memory controller, else v1.
func (fs cgroupFS) discover() (hierarchy, error) {
	var mounts []mountEntry
	for _, line := range strings.Split(fs.mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || (g[0] != "cgroup" && g[0] != "cgroup2") {
			continue
		}
		mounts = append(mounts, mountEntry{root: f[3], point: f[4], fstype: g[0], opts: g[2]})
	}
	paths := map[string]string{} // controller ("" for v2) -> cgroup path
	for _, line := range strings.Split(fs.procCgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			paths[""] = parts[2]
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			paths[ctl] = parts[2]
		}
	}
	join := func(m mountEntry, p string) string {
		if m.root != "/" {
			p = strings.TrimPrefix(p, m.root)
		}
		return filepath.Join(fs.root, m.point, p)
	}
	// v2 with the memory controller.
	for _, m := range mounts {
		if m.fstype != "cgroup2" {
			continue
		}
		top := filepath.Join(fs.root, m.point)
		ctl, _ := os.ReadFile(filepath.Join(top, "cgroup.controllers"))
		if !hasWord(string(ctl), "memory") {
			continue
		}
		return discoverV2(top, join(m, paths[""]), hasWord(string(ctl), "cpu"))
	}
	// v1.
	var h hierarchy
	for _, m := range mounts {
		if m.fstype != "cgroup" {
			continue
		}
		opts := strings.Split(m.opts, ",")
		if contains(opts, "memory") && h.memParent == "" {
			h.memParent = join(m, paths["memory"])
		}
		if contains(opts, "cpu") && h.cpuParent == "" {
			h.cpuParent = join(m, paths["cpu"])
		}
	}
	if h.memParent == "" {
		return h, &UnavailableError{Reason: "no cgroup hierarchy with the memory controller is mounted"}
	}
	h.version = 1
	return h, nil
}

// discoverV2 picks the parent for a v2 child of the hierarchy mounted at top:
// the process's own cgroup if the memory controller can be enabled for its
// children, else the root (cgroup v2 forbids enabling controllers for
// children of a cgroup that has processes of its own, except at the root).
func discoverV2(top, own string, rootHasCPU bool) (hierarchy, error) {
	try := func(parent string) (hierarchy, bool) {
		enable := "+memory"
		if rootHasCPU {
			enable += " +cpu"
		}
		// Enable the controllers on every level from the mount down to parent.
		rel, _ := filepath.Rel(top, parent)
		dir := top
		steps := []string{dir}
		if rel != "." {
			for _, p := range strings.Split(rel, "/") {
				dir = filepath.Join(dir, p)
				steps = append(steps, dir)
			}
		}
		for _, d := range steps {
			sc, _ := os.ReadFile(filepath.Join(d, "cgroup.subtree_control"))
			if hasWord(string(sc), "memory") && (!rootHasCPU || hasWord(string(sc), "cpu")) {
				continue
			}
			if err := writeFile(filepath.Join(d, "cgroup.subtree_control"), enable); err != nil {
				// cpu may be refused (realtime threads) while memory works.
				if writeFile(filepath.Join(d, "cgroup.subtree_control"), "+memory") != nil {
					return hierarchy{}, false
				}
			}
		}
		sc, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
		return hierarchy{version: 2, memParent: parent, cpu: hasWord(string(sc), "cpu")}, true
	}
	if h, ok := try(own); ok {
		return h, nil
	}
	if h, ok := try(top); ok {
		return h, nil
	}
	return hierarchy{}, &UnavailableError{Reason: fmt.Sprintf("cannot enable the memory controller under %s or %s", own, top)}
}

func hasWord(s, w string) bool { return contains(strings.Fields(s), w) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
