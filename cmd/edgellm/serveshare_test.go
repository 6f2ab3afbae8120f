package main

import (
	"os"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// mergeableVMAs counts this process's mappings advised MADV_MERGEABLE
// ("mg" in smaps' VmFlags).
func mergeableVMAs(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("smaps: %v", err)
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if f, ok := strings.CutPrefix(line, "VmFlags:"); ok && strings.Contains(" "+f+" ", " mg ") {
			n++
		}
	}
	return n
}

// TestServeShareAnchors (issue #29.4): serve --window --anchors gives its
// one session anchors; with --share-anchors their pages are advised
// mergeable (VMAs flagged "mg", one per K and V region of each layer,
// whatever KSM's state), without it they are not (a lone session). The
// llamacpp engine refuses the flag with one usage line.
func TestServeShareAnchors(t *testing.T) {
	model := sharedtest.Stories260K(t)
	const nLayer = 5 // stories260K
	for _, share := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[share], func(t *testing.T) {
			args := []string{"-m", model, "--engine", "native", "--threads", "1", "--ctx", "1024", "--window", "64", "--anchors", "512"}
			if share {
				args = append(args, "--share-anchors")
			}
			before := mergeableVMAs(t)
			_, stderr := startServe(t, args...)
			if !strings.Contains(stderr.String(), "KV window: 64 recent positions + 512 anchors") {
				t.Errorf("no window announced: %s", stderr.String())
			}
			got := mergeableVMAs(t) - before
			if want := map[bool]int{false: 0, true: 2 * nLayer}[share]; got != want {
				t.Errorf("--share-anchors %v: %d more mergeable VMAs, want %d", share, got, want)
			}
			if announced := strings.Contains(stderr.String(), "advised mergeable"); announced != share {
				t.Errorf("--share-anchors %v: announced %v: %s", share, announced, stderr.String())
			}
		})
	}
	_, errs, code := runCLI(t, "serve", "-m", model, "--engine", "llamacpp", "--share-anchors", "--addr", "127.0.0.1:0")
	if code != 2 || !strings.Contains(errs, "--share-anchors") || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("serve --share-anchors on llamacpp: exit %d, %q", code, errs)
	}
}
