package native

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// Anchors shared across processes (issue #29.4, Options.ShareAnchors):
// `serve` runs one session per process, so the engine's own rule (advise
// while two sessions are open) never fires there. The test re-executes
// its own binary as child processes, each one engine with one session.

// ksmChildEnv marks a child of TestSharedAnchorsKSMProcesses.
const ksmChildEnv = "EDGELLM_KSM_CHILD"

// TestSharedAnchorsKSMChild is one child process: stories260K loaded with
// ShareAnchors, one session, the 512-token system prompt as anchors and 8
// generated tokens; it prints its zone pages and the zones' addresses on
// one "ksm-child" line and holds the session until its stdin closes.
// Skipped unless run by TestSharedAnchorsKSMProcesses.
func TestSharedAnchorsKSMChild(t *testing.T) {
	if os.Getenv(ksmChildEnv) != "1" {
		t.Skip("a child process of TestSharedAnchorsKSMProcesses")
	}
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1, ShareAnchors: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	toks := storiesTokens(t, e)
	s := newTestSession(t, e, engine.SessionConfig{NCtx: 1024, KVType: engine.KVF16})
	sharedPrompt(t, s, toks[:512], 64, 8)
	ps := int64(os.Getpagesize())
	var spans []string
	for _, z := range zoneSpans([]*KVArena{s.kv}) {
		spans = append(spans, fmt.Sprintf("%x-%x", z.lo, z.hi))
	}
	debug.FreeOSMemory() // the PSS the parent reads is the session's, not garbage
	fmt.Printf("ksm-child mergeable=%v pages=%d spans=%s\n", s.kv.Mergeable(),
		2*int64(len(s.kv.K))*s.kv.zone/ps, strings.Join(spans, ","))
	io.Copy(io.Discard, os.Stdin) // until the parent closes it
}

// ksmChild is a running child: its pid, zone pages and zone spans.
type ksmChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pages int64
	spans []vmaSpan
}

// startKSMChild starts a child and waits for its ksm-child line.
func startKSMChild(t *testing.T) *ksmChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSharedAnchorsKSMChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), ksmChildEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &ksmChild{cmd: cmd, stdin: in}
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(out)
	var lines []string
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "ksm-child ")
		if !ok {
			lines = append(lines, line)
			continue
		}
		go io.Copy(io.Discard, out) // the rest: the test's own PASS lines
		for _, f := range strings.Fields(rest) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "mergeable":
				if v != "true" {
					t.Fatalf("child %d: one session with ShareAnchors is not mergeable", cmd.Process.Pid)
				}
			case "pages":
				c.pages, _ = strconv.ParseInt(v, 10, 64)
			case "spans":
				for _, sp := range strings.Split(v, ",") {
					lo, hi, _ := strings.Cut(sp, "-")
					a, _ := strconv.ParseUint(lo, 16, 64)
					b, _ := strconv.ParseUint(hi, 16, 64)
					c.spans = append(c.spans, vmaSpan{a, b})
				}
			}
		}
		if c.pages == 0 || len(c.spans) == 0 {
			t.Fatalf("child %d: %q: no anchor zone", cmd.Process.Pid, line)
		}
		return c
	}
	t.Fatalf("child %d ended before its ksm-child line: %s", cmd.Process.Pid, strings.Join(lines, "\n"))
	return nil
}

func (c *ksmChild) zoneKB(t *testing.T) (rss, pss int64) {
	t.Helper()
	return spansKB(t, fmt.Sprintf("/proc/%d/smaps", c.cmd.Process.Pid), c.spans)
}

// ownPSS is the child's Pss_Anon + Pss_Shmem (kB; see ownPSS).
// readChildren sums the children's zone RSS and PSS (kB) and returns each
// child's own PSS (anon+shmem, kB).
func readChildren(t *testing.T, cs []*ksmChild) (rss, pss int64, own []int64) {
	own = make([]int64, len(cs))
	for i, c := range cs {
		r, p := c.zoneKB(t)
		rss, pss = rss+r, pss+p
		own[i] = c.ownPSS(t)
	}
	return rss, pss, own
}

func (c *ksmChild) ownPSS(t *testing.T) int64 {
	t.Helper()
	f := fmt.Sprintf("/proc/%d/smaps_rollup", c.cmd.Process.Pid)
	return procKB(t, f, "Pss_Anon") + procKB(t, f, "Pss_Shmem")
}

// TestSharedAnchorsKSMProcesses (issue #29.4, Options.ShareAnchors): four
// child processes, each one engine with one session of stories260K and
// the same 512-token system prompt as anchors (TestSharedAnchorsKSMChild).
// With KSM switched on (skipped where /sys/kernel/mm/ksm/run cannot be
// written; every knob restored) every zone page of every child is merged
// (/proc/PID/ksm_merging_pages; where the kernel lacks it, pages_sharing
// rises by (N-1) × a child's zone pages: machine-wide, logged always),
// the zones' PSS summed over the children falls from N copies to one (or
// less, shared with other processes holding the same anchors), and every
// child's PSS (smaps_rollup) drops. Waits are bounded
// by ksmd's full-scan counter. Without the option a lone session is never
// advised and nothing merges.
func TestSharedAnchorsKSMProcesses(t *testing.T) {
	if os.Getenv(ksmChildEnv) == "1" {
		t.Skip("in a child")
	}
	sharedtest.Stories260K(t) // skips where the model is missing, before KSM is touched
	const n = 4
	k := ksmOn(t)
	k.write("run", "0")
	var cs []*ksmChild
	for range n {
		cs = append(cs, startKSMChild(t))
	}
	zonePages := cs[0].pages
	for i, c := range cs {
		if c.pages != zonePages {
			t.Fatalf("child %d: %d zone pages, child 1 %d", i+1, c.pages, zonePages)
		}
	}
	ps := int64(os.Getpagesize())
	zoneKBs := zonePages * ps / 1024
	rss0, pss0, roll0 := readChildren(t, cs)
	if pss0 != n*zoneKBs {
		t.Fatalf("before KSM: zones' PSS %d kB over %d children, want %d × %d", pss0, n, n, zoneKBs)
	}
	base := k.read("pages_sharing")
	ticks0, t0 := ksmdTicks(), time.Now()
	k.write("run", "1")
	// Each child's own merged-page count (pages_sharing is machine-wide:
	// other processes using KSM meanwhile move it), or pages_sharing
	// where the kernel has no per-process count.
	merged := make([]int64, n)
	perProc := true
	done := func() bool {
		all := true
		for i, c := range cs {
			m, ok := mergingPages(strconv.Itoa(c.cmd.Process.Pid))
			perProc = perProc && ok
			merged[i] = m
			all = all && m >= zonePages
		}
		return perProc && all
	}
	want := (n - 1) * zonePages
	var scans int64
	if done(); perProc {
		scans = k.until(done, 8)
	} else {
		_, scans = k.waitSharing(base+want, 8)
	}
	got := k.read("pages_sharing")
	ticks1, wall := ksmdTicks(), time.Since(t0)
	if perProc {
		for i, m := range merged {
			if m < zonePages {
				t.Fatalf("child %d: %d pages merged after %d full scans, want its %d zone pages (all: %v)", i+1, m, scans, zonePages, merged)
			}
		}
	} else if got-base < want {
		t.Fatalf("pages_sharing rose by %d in %d full scans, want %d ((N-1) × %d zone pages)", got-base, scans, want, zonePages)
	}
	rss1, pss1, roll1 := readChildren(t, cs)
	t.Logf("%d processes, %d zone pages each: merged pages per child %v; pages_sharing +%d (want %d, machine-wide) after %d full scans; zones PSS %d → %d kB (RSS %d → %d kB); children's PSS (anon+shmem) %v → %v kB; ksmd CPU %d ticks (1/100 s) in %v",
		n, zonePages, merged, got-base, want, scans, pss0, pss1, rss0, rss1, roll0, roll1, ticks1-ticks0, wall.Round(time.Millisecond))
	// One copy left (or less, when other processes on the machine hold the
	// same anchors): smaps rounds each VMA's PSS down to a kB.
	if pss1 > zoneKBs+int64(len(cs[0].spans))*n {
		t.Fatalf("after KSM: zones' PSS %d kB over %d children, want about %d (one copy)", pss1, n, zoneKBs)
	}
	// Each child's own PSS drops by its share, (N-1)/N of its zone; at
	// least half of that survives any noise of an idle child.
	for i := range cs {
		if drop := roll0[i] - roll1[i]; drop < (n-1)*zoneKBs/n/2 {
			t.Fatalf("child %d: PSS dropped by %d kB (%d → %d), want at least half of %d", i+1, drop, roll0[i], roll1[i], (n-1)*zoneKBs/n)
		}
	}
}
