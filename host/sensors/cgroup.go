package sensors

import (
	"os"
	"path/filepath"
	"strings"
)

// CgroupMemory is the memory limit and usage of the cgroup the process is in,
// from cgroup v2 (memory.max, memory.current, memory.events) or cgroup v1
// (memory.limit_in_bytes, memory.usage_in_bytes, memory.oom_control,
// memory.failcnt), whichever hierarchy has the memory controller.
type CgroupMemory struct {
	Present bool
	Version int    // 1 or 2
	Dir     string // the cgroup directory that is read
	// Limited says a limit applies; Limit is then the smallest limit of the
	// cgroup and its ancestors, in bytes (a child can never use more than its
	// parents allow). Values ≥ 2^62 in v1 and "max" in v2 mean no limit.
	Limited bool
	Limit   int64
	Usage   int64 // bytes charged to the cgroup (page cache included)
	Events  MemoryEvents
}

// MemoryEvents are the cgroup's memory event counters since it was created.
// v2 has all of them (memory.events). v1 has OOMKill and UnderOOM
// (memory.oom_control, OOMKill since Linux 4.13) and Max, taken from
// memory.failcnt (how often usage hit the limit); Low, High and OOM stay 0.
type MemoryEvents struct {
	Present bool
	Low     uint64 // reclaimed below memory.low (v2)
	High    uint64 // throttled above memory.high (v2)
	Max     uint64 // usage hit the limit (v2 "max", v1 failcnt)
	OOM     uint64 // the limit was hit and reclaim failed (v2)
	OOMKill uint64 // processes killed by the OOM killer
	// UnderOOM (v1) is set while the cgroup is under OOM with the killer off.
	UnderOOM bool
}

// v1Unlimited: cgroup v1 reports "no limit" as PAGE_COUNTER_MAX pages, a value
// near 2^63 rounded to the page size. Anything this large is no limit.
const v1Unlimited = int64(1) << 62

// ParseMemoryEvents adds to e the counters of "key value" lines: cgroup v2
// memory.events or v1 memory.oom_control. Unknown keys are ignored; it does
// not allocate.
func ParseMemoryEvents(b []byte, e *MemoryEvents) { parseMemoryEvents(b, e) }

func parseMemoryEvents(b []byte, e *MemoryEvents) {
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		key, rest := cutField(line)
		v, ok := parseInt(rest)
		if !ok || v < 0 {
			continue
		}
		switch string(key) {
		case "low":
			e.Low = uint64(v)
		case "high":
			e.High = uint64(v)
		case "max":
			e.Max = uint64(v)
		case "oom":
			e.OOM = uint64(v)
		case "oom_kill":
			e.OOMKill = uint64(v)
		case "under_oom":
			e.UnderOOM = v != 0
		default:
			continue
		}
		e.Present = true
	}
}

// parseLimit parses memory.max ("max" or bytes) or memory.limit_in_bytes.
func parseLimit(b []byte) (limit int64, limited, ok bool) {
	b = trimSpace(b)
	if string(b) == "max" {
		return 0, false, true
	}
	v, ok := parseInt(b)
	if !ok || v < 0 {
		return 0, false, false
	}
	if v >= v1Unlimited {
		return 0, false, true
	}
	return v, true, true
}

// cgroupFiles are the open files of the memory cgroup.
type cgroupFiles struct {
	version int
	dir     string
	limits  []kfile // the cgroup's limit file, then its ancestors'
	usage   kfile
	events  kfile // v2 memory.events, v1 memory.oom_control
	failcnt kfile // v1 only
}

func (c *cgroupFiles) close() {
	for i := range c.limits {
		c.limits[i].close()
	}
	c.usage.close()
	c.events.close()
	c.failcnt.close()
}

// read fills m. buf is scratch space.
func (c *cgroupFiles) read(buf []byte, m *CgroupMemory) {
	*m = CgroupMemory{}
	b, ok := c.usage.read(buf)
	if !ok {
		return
	}
	usage, ok := parseInt(b)
	if !ok {
		return
	}
	m.Present, m.Version, m.Dir, m.Usage = true, c.version, c.dir, usage
	for i := range c.limits {
		if b, ok := c.limits[i].read(buf); ok {
			if l, limited, ok := parseLimit(b); ok && limited && (!m.Limited || l < m.Limit) {
				m.Limit, m.Limited = l, true
			}
		}
	}
	if b, ok := c.events.read(buf); ok {
		parseMemoryEvents(b, &m.Events)
	}
	if b, ok := c.failcnt.read(buf); ok {
		if v, ok := parseInt(b); ok && v >= 0 {
			m.Events.Max, m.Events.Present = uint64(v), true
		}
	}
}

// mount is one cgroup line of /proc/self/mountinfo.
type mount struct {
	root, point, fstype, superOpts string
}

// parseMountinfo returns the cgroup and cgroup2 mounts of a mountinfo file.
func parseMountinfo(s string) []mount {
	var out []mount
	for _, line := range strings.Split(s, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || (g[0] != "cgroup" && g[0] != "cgroup2") {
			continue
		}
		out = append(out, mount{root: unescapeMount(f[3]), point: unescapeMount(f[4]), fstype: g[0], superOpts: g[2]})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes of blanks (\040 and friends).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// procCgroup is one line of /proc/PID/cgroup: "ID:controllers:path".
type procCgroup struct {
	controllers []string // empty for the v2 line "0::/path"
	path        string
}

func parseProcCgroup(s string) []procCgroup {
	var out []procCgroup
	for _, line := range strings.Split(s, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var ctl []string
		if parts[1] != "" {
			ctl = strings.Split(parts[1], ",")
		}
		out = append(out, procCgroup{controllers: ctl, path: parts[2]})
	}
	return out
}

// joinCgroup maps a cgroup path of /proc/PID/cgroup onto the directory of the
// hierarchy mounted at m, under the injected root.
func joinCgroup(root string, m mount, path string) string {
	rel := path
	if m.root != "/" && m.root != "" {
		if r, ok := strings.CutPrefix(path, m.root); ok && (r == "" || r[0] == '/') {
			rel = r
		} else {
			rel = "/" // the process sits outside this mount's root
		}
	}
	return filepath.Join(root, m.point, rel)
}

// openCgroup finds the memory cgroup of the process and opens its files. It
// prefers cgroup v2 when the unified hierarchy has the memory controller and
// falls back to v1 (hybrid systems, older Android's /dev/memcg).
func openCgroup(root, procDir string) cgroupFiles {
	procCg, _ := os.ReadFile(filepath.Join(procDir, "cgroup"))
	mi, _ := os.ReadFile(filepath.Join(procDir, "mountinfo"))
	lines := parseProcCgroup(string(procCg))
	mounts := parseMountinfo(string(mi))
	if len(mounts) == 0 { // no mountinfo: the conventional places
		mounts = []mount{
			{root: "/", point: "/sys/fs/cgroup", fstype: "cgroup2"},
			{root: "/", point: "/sys/fs/cgroup/unified", fstype: "cgroup2"},
			{root: "/", point: "/sys/fs/cgroup/memory", fstype: "cgroup", superOpts: "memory"},
			{root: "/", point: "/dev/memcg", fstype: "cgroup", superOpts: "memory"},
		}
	}
	// v2
	for _, l := range lines {
		if len(l.controllers) != 0 {
			continue
		}
		for _, m := range mounts {
			if m.fstype != "cgroup2" {
				continue
			}
			dir := joinCgroup(root, m, l.path)
			usage := openKFile(filepath.Join(dir, "memory.current"))
			if !usage.ok() {
				continue
			}
			c := cgroupFiles{version: 2, dir: dir, usage: usage,
				events: openKFile(filepath.Join(dir, "memory.events"))}
			c.limits = ancestorFiles(dir, filepath.Join(root, m.point), "memory.max")
			return c
		}
	}
	// v1
	for _, l := range lines {
		if !contains(l.controllers, "memory") {
			continue
		}
		for _, m := range mounts {
			if m.fstype != "cgroup" || !contains(strings.Split(m.superOpts, ","), "memory") {
				continue
			}
			dir := joinCgroup(root, m, l.path)
			usage := openKFile(filepath.Join(dir, "memory.usage_in_bytes"))
			if !usage.ok() {
				continue
			}
			c := cgroupFiles{version: 1, dir: dir, usage: usage,
				events:  openKFile(filepath.Join(dir, "memory.oom_control")),
				failcnt: openKFile(filepath.Join(dir, "memory.failcnt"))}
			c.limits = ancestorFiles(dir, filepath.Join(root, m.point), "memory.limit_in_bytes")
			return c
		}
	}
	return cgroupFiles{}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ancestorFiles opens name in dir and each parent up to the mount point top:
// the effective limit is the smallest over the cgroup and its ancestors.
func ancestorFiles(dir, top, name string) []kfile {
	var out []kfile
	for d := dir; strings.HasPrefix(d, top); d = filepath.Dir(d) {
		if f := openKFile(filepath.Join(d, name)); f.ok() {
			out = append(out, f)
		}
		if d == top || d == filepath.Dir(d) {
			break
		}
	}
	return out
}
