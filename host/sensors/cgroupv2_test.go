//go:build linux || android

package sensors

// Cases of the cgroup v2 read path that the phone-v2 fixture does not cover,
// on temp-dir trees laid out like a v2 mount (not a v2 kernel: the files are
// plain files, so this proves which files are found and how they parse, not
// what a kernel puts in them).

import (
	"os"
	"path/filepath"
	"testing"
)

func putFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	miV2Line   = "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	miDocker   = "30 22 0:26 /system.slice/docker-abc.scope /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
	miV1Memory = "31 22 0:28 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
	v2Events   = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n"
)

func TestCgroupV2Trees(t *testing.T) {
	const cg = "sys/fs/cgroup"
	tests := []struct {
		name  string
		files map[string]string // below the root
		opts  []Option
		want  CgroupMemory // Dir relative to the root
	}{
		{
			name: "no limit anywhere",
			files: map[string]string{
				"proc/self/mountinfo": miV2Line, "proc/self/cgroup": "0::/user.slice/x.scope\n",
				cg + "/user.slice/memory.max":             "max\n",
				cg + "/user.slice/x.scope/memory.max":     "max\n",
				cg + "/user.slice/x.scope/memory.current": "4096\n",
				cg + "/user.slice/x.scope/memory.events":  v2Events,
			},
			want: CgroupMemory{Present: true, Version: 2, Dir: cg + "/user.slice/x.scope", Usage: 4096,
				Events: MemoryEvents{Present: true, Max: 12, OOM: 3, OOMKill: 2}},
		},
		{
			// The smallest limit wins; a file above the mount point (here
			// a stray one in sys/fs) is not an ancestor and is not read.
			name: "own limit below the parent's, nothing above the mount",
			files: map[string]string{
				"proc/self/mountinfo": miV2Line, "proc/self/cgroup": "0::/a/b\n",
				"sys/fs/memory.max":         "1\n",
				cg + "/a/memory.max":        "1073741824\n",
				cg + "/a/b/memory.max":      "536870912\n",
				cg + "/a/b/memory.current":  "1000\n",
				cg + "/a/b/memory.swap.max": "0\n",
			},
			want: CgroupMemory{Present: true, Version: 2, Dir: cg + "/a/b", Limited: true, Limit: 512 << 20, Usage: 1000},
		},
		{
			// Docker without a cgroup namespace: the mount's root is the
			// container's cgroup; /proc/self/cgroup has the full path.
			name: "mount root below the hierarchy root",
			files: map[string]string{
				"proc/self/mountinfo": miDocker, "proc/self/cgroup": "0::/system.slice/docker-abc.scope/app\n",
				cg + "/memory.max":         "268435456\n",
				cg + "/app/memory.current": "2000\n",
				cg + "/app/memory.max":     "max\n",
			},
			want: CgroupMemory{Present: true, Version: 2, Dir: cg + "/app", Limited: true, Limit: 256 << 20, Usage: 2000},
		},
		{
			// The process's cgroup lies outside what the mount shows:
			// read the mount's top, the closest visible cgroup.
			name: "cgroup outside the mount root",
			files: map[string]string{
				"proc/self/mountinfo": miDocker, "proc/self/cgroup": "0::/system.slice/other.scope\n",
				cg + "/memory.current": "3000\n",
				cg + "/memory.max":     "268435456\n",
			},
			want: CgroupMemory{Present: true, Version: 2, Dir: cg, Limited: true, Limit: 256 << 20, Usage: 3000},
		},
		{
			name: "no mountinfo: the conventional /sys/fs/cgroup",
			files: map[string]string{
				"proc/self/cgroup":            "0::/s\n",
				cg + "/s/memory.current":      "5000\n",
				cg + "/s/memory.max":          "8192\n",
				cg + "/s/memory.events":       v2Events,
				cg + "/s/memory.events.local": "oom_kill 99\n",
			},
			want: CgroupMemory{Present: true, Version: 2, Dir: cg + "/s", Limited: true, Limit: 8192, Usage: 5000,
				Events: MemoryEvents{Present: true, Max: 12, OOM: 3, OOMKill: 2}},
		},
		{
			// memory not enabled for the own cgroup (no memory.current)
			// and a v1 memory hierarchy: v1 is read.
			name: "v2 without memory for us, v1 memory",
			files: map[string]string{
				"proc/self/mountinfo":                  miV2Line + miV1Memory,
				"proc/self/cgroup":                     "7:memory:/m\n0::/user.slice\n",
				cg + "/user.slice/cgroup.procs":        "",
				cg + "/memory/m/memory.usage_in_bytes": "6000\n",
			},
			want: CgroupMemory{Present: true, Version: 1, Dir: cg + "/memory/m", Usage: 6000},
		},
		{
			name: "v2 without memory, no v1",
			files: map[string]string{
				"proc/self/mountinfo": miV2Line, "proc/self/cgroup": "0::/user.slice\n",
				cg + "/user.slice/memory.max": "4096\n", // no memory.current: not a usable memory cgroup
			},
			want: CgroupMemory{},
		},
		{
			name: "another process (WithPID)",
			files: map[string]string{
				"proc/4242/mountinfo": miV2Line, "proc/4242/cgroup": "0::/apps/p4242\n",
				"proc/self/mountinfo": miV2Line, "proc/self/cgroup": "0::/other\n",
				cg + "/apps/p4242/memory.current": "7000\n",
				cg + "/other/memory.current":      "1\n",
			},
			opts: []Option{WithPID(4242)},
			want: CgroupMemory{Present: true, Version: 2, Dir: cg + "/apps/p4242", Usage: 7000},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tc.files {
				putFile(t, filepath.Join(root, p), c)
			}
			r, err := NewReader(append([]Option{WithRoot(root), WithSources(SourceCgroup)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var s Snapshot
			r.Read(&s)
			want := tc.want
			if want.Dir != "" {
				want.Dir = filepath.Join(root, want.Dir)
			}
			if s.Cgroup != want {
				t.Errorf("cgroup %+v\nwant   %+v", s.Cgroup, want)
			}
		})
	}
}

// TestCgroupV2Reread checks that the files opened once are re-read on every
// sample: an OOM kill and a new limit written between two reads show up.
func TestCgroupV2Reread(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sys/fs/cgroup/s")
	putFile(t, filepath.Join(root, "proc/self/mountinfo"), miV2Line)
	putFile(t, filepath.Join(root, "proc/self/cgroup"), "0::/s\n")
	putFile(t, filepath.Join(dir, "memory.current"), "1000\n")
	putFile(t, filepath.Join(dir, "memory.max"), "max\n")
	putFile(t, filepath.Join(dir, "memory.events"), "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
	r, err := NewReader(WithRoot(root), WithSources(SourceCgroup))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var s Snapshot
	r.Read(&s)
	if c := s.Cgroup; !c.Present || c.Limited || c.Usage != 1000 || c.Events.OOMKill != 0 || !c.Events.Present {
		t.Fatalf("first read %+v", c)
	}
	// os.WriteFile truncates and rewrites the same inode, like a kernel
	// file whose content changed under an open descriptor.
	putFile(t, filepath.Join(dir, "memory.current"), "2000\n")
	putFile(t, filepath.Join(dir, "memory.max"), "1048576\n")
	putFile(t, filepath.Join(dir, "memory.events"), v2Events)
	r.Read(&s)
	if c := s.Cgroup; !c.Limited || c.Limit != 1<<20 || c.Usage != 2000 || c.Events.OOMKill != 2 || c.Events.Max != 12 {
		t.Errorf("second read %+v", c)
	}
}
