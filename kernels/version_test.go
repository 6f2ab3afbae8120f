package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestLlamaCommitMatchesModule(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", ollamaModule).Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "Makefile.sync"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^FETCH_HEAD=(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no FETCH_HEAD in Makefile.sync")
	}
	if got := string(m[1]); got != llamaCommit {
		t.Fatalf("llamaCommit = %q, the pinned module vendors %q: update kernels/version.go", llamaCommit, got)
	}
}

func TestSystemInfo(t *testing.T) {
	info := SystemInfo()
	if !strings.Contains(info, "CPU") {
		t.Fatalf("SystemInfo() = %q", info)
	}
	// The Makefile builds with -march=native; on an x86 machine with AVX2 ggml
	// must have been compiled with it.
	if cpu, err := os.ReadFile("/proc/cpuinfo"); err == nil && strings.Contains(string(cpu), " avx2") {
		if !strings.Contains(info, "AVX2 = 1") {
			t.Fatalf("CPU has AVX2 but ggml was built without it: %q (is CGO_CFLAGS -march=native set?)", info)
		}
	}
}
