package native

import (
	"bytes"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// sharedPrompt decodes the system prompt sys as one batch into s (window
// on: anchors = len(sys)), then gen greedy tokens, and returns them.
func sharedPrompt(t testing.TB, s *Session, sys []int32, window, gen int) []int32 {
	t.Helper()
	if err := s.SetWindow(len(sys), window); err != nil {
		t.Fatal(err)
	}
	return greedy(t, s, sys, gen, s.cfg.NVocab)
}

// zoneBytes is layer il's K (v false) or V anchor zone.
func zoneBytes(a *KVArena, il int, v bool) []byte { return a.region(il, v)[:a.zone] }

// TestAnchorZonePrivate: a session's anchor zone is private anonymous
// memory of floor(anchors·RowK / page) pages per K and V region, and
// decoding over it gives the same logits, bit for bit, as the same session
// with the zone moved back to the memfd (SetAnchorCells(0)), and as one
// whose zone is made private after its anchors were written; a KV type
// change moves the zone to the new row size.
func TestAnchorZonePrivate(t *testing.T) {
	e, toks := storiesText(t)
	ps := os.Getpagesize()
	sys := toks[:512]
	sc := engine.SessionConfig{NCtx: 1024, KVType: engine.KVF16}
	a := newTestSession(t, e, sc)
	b := newTestSession(t, e, sc)
	if err := a.SetWindow(len(sys), 64); err != nil {
		t.Fatal(err)
	}
	wantZone := int64(len(sys)) * a.kv.RowK / int64(ps) * int64(ps)
	if wantZone == 0 {
		t.Fatalf("RowK %d: no whole page of anchors", a.kv.RowK)
	}
	if got := a.kv.AnchorZoneBytes(); got != wantZone {
		t.Fatalf("zone = %d bytes, want %d", got, wantZone)
	}
	if got, want := a.kv.mem.PrivateBytes(), int(wantZone)*2*e.w.Config.NLayer; got != want {
		t.Fatalf("private bytes = %d, want %d", got, want)
	}
	if err := b.SetWindow(len(sys), 64); err != nil {
		t.Fatal(err)
	}
	if err := b.kv.SetAnchorCells(0); err != nil { // b: the zone in the memfd
		t.Fatal(err)
	}
	if b.kv.mem.PrivateBytes() != 0 {
		t.Fatal("SetAnchorCells(0) left private pages")
	}
	la, lb := make([]float32, e.w.Config.NVocab), make([]float32, e.w.Config.NVocab)
	step := func(s *Session, toks []int32, l []float32) {
		t.Helper()
		if err := s.Decode(toks, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if err := s.Logits(len(toks)-1, l); err != nil {
			t.Fatal(err)
		}
	}
	step(a, sys, la)
	step(b, sys, lb)
	if err := b.kv.SetAnchorCells(len(sys)); err != nil { // private after the fact
		t.Fatal(err)
	}
	for il := range e.w.Config.NLayer {
		for _, v := range []bool{false, true} {
			if !bytes.Equal(zoneBytes(a.kv, il, v), zoneBytes(b.kv, il, v)) {
				t.Fatalf("layer %d v=%v: anchor zones differ after the same prefill", il, v)
			}
		}
	}
	for i := range 100 { // past the ring's 64+512 slots: it wraps
		if !slicesEqual(la, lb) {
			t.Fatalf("token %d: logits differ", i)
		}
		tok := []int32{kernels.Argmax(la)}
		step(a, tok, la)
		step(b, tok, lb)
	}
	// A KV type change: the zone follows the row size (Q8_0: 34/64 of it).
	if _, err := a.SetKVType(engine.KVQ8_0); err != nil {
		t.Fatal(err)
	}
	if got, want := a.kv.AnchorZoneBytes(), int64(len(sys))*a.kv.RowK/int64(ps)*int64(ps); got != want || got >= wantZone {
		t.Fatalf("after q8_0: zone %d bytes, want %d (< %d)", got, want, wantZone)
	}
	step(a, []int32{kernels.Argmax(la)}, la)
}

// ownPSS is the process's PSS without file pages (Pss_Anon + Pss_Shmem of
// smaps_rollup, kB): the model file's pages are shared with whatever else
// maps it on the machine, which moves its PSS share. The Go heap's
// garbage is returned to the kernel first (it would otherwise move the
// number by up to the live heap).
func ownPSS(t testing.TB) int64 {
	debug.FreeOSMemory()
	return procKB(t, "/proc/self/smaps_rollup", "Pss_Anon") + procKB(t, "/proc/self/smaps_rollup", "Pss_Shmem")
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSharedAnchorsKSM (issue #29.4): eight sessions of stories260K with
// one 512-token system prompt as anchors. Their anchor zones are advised
// mergeable as soon as two sessions are open; with KSM switched on
// (skipped where /sys/kernel/mm/ksm/run cannot be written) every zone
// page is merged (/proc/self/ksm_merging_pages; where the kernel lacks it,
// pages_sharing rises by (N-1) × the zone pages of a session), the zones'
// PSS falls from N copies to one, and the process's PSS (smaps_rollup)
// drops; closing all but one session advises the last one unmergeable
// and none of its pages stays merged. Waits are bounded by ksmd's
// full-scan counter.
func TestSharedAnchorsKSM(t *testing.T) {
	e, toks := storiesText(t)
	sys := toks[:512]
	const n = 8
	sc := engine.SessionConfig{NCtx: 1024, KVType: engine.KVF16}
	var ss []*Session
	var arenas []*KVArena
	for i := range n {
		s, err := e.newSession(sc)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got, want := s.kv.Mergeable(), i > 0; got != want {
			t.Fatalf("session %d open: mergeable %v, want %v", i+1, got, want)
		}
		sharedPrompt(t, s, sys, 64, 8)
		ss, arenas = append(ss, s), append(arenas, s.kv)
	}
	for _, s := range ss {
		if !s.kv.Mergeable() || s.kv.zone == 0 {
			t.Fatalf("with %d sessions open: mergeable %v, zone %d", n, s.kv.Mergeable(), s.kv.zone)
		}
	}
	for i := 1; i < n; i++ {
		for il := range e.w.Config.NLayer {
			if !bytes.Equal(zoneBytes(arenas[0], il, false), zoneBytes(arenas[i], il, false)) {
				t.Fatalf("session %d layer %d: anchor K differs from session 1's", i+1, il)
			}
		}
	}
	ps := int64(os.Getpagesize())
	zonePages := 2 * int64(e.w.Config.NLayer) * arenas[0].zone / ps // per session
	zoneKBs := zonePages * ps / 1024
	_, pss0 := zoneKB(t, arenas)
	roll0 := ownPSS(t)

	k := ksmOn(t) // (reads the knobs; base is taken before run=1)
	k.write("run", "0")
	base := k.read("pages_sharing")
	ticks0, t0 := ksmdTicks(), time.Now()
	k.write("run", "1")
	want := (n - 1) * zonePages
	// This process's merged pages (pages_sharing is machine-wide: other
	// processes using KSM meanwhile move it), or pages_sharing where the
	// kernel has no per-process count.
	_, perProc := mergingPages("self")
	var mine, scans int64
	if perProc {
		scans = k.until(func() bool { mine, _ = mergingPages("self"); return mine >= n*zonePages }, 8)
	} else {
		_, scans = k.waitSharing(base+want, 8)
	}
	got := k.read("pages_sharing")
	ticks1, wall := ksmdTicks(), time.Since(t0)
	if perProc && mine < n*zonePages {
		t.Fatalf("%d of this process's pages merged in %d full scans, want all %d zone pages (%d × %d)", mine, scans, n*zonePages, n, zonePages)
	}
	if !perProc && got-base < want {
		t.Fatalf("pages_sharing rose by %d in %d full scans, want %d ((N-1) × %d zone pages)", got-base, scans, want, zonePages)
	}
	if pss0 != n*zoneKBs {
		t.Fatalf("before KSM: zones' PSS %d kB, want %d × %d", pss0, n, zoneKBs)
	}
	rss1, pss1 := zoneKB(t, arenas)
	roll1 := ownPSS(t)
	t.Logf("%d sessions, %d zone pages each: %d pages of the process merged; pages_sharing +%d (machine-wide) after %d full scans; zones PSS %d → %d kB (RSS %d kB); process PSS (anon+shmem) %d → %d kB; ksmd CPU %d ticks (1/100 s) in %v",
		n, zonePages, mine, got-base, scans, pss0, pss1, rss1, roll0, roll1, ticks1-ticks0, wall.Round(time.Millisecond))
	// One copy left: each merged page's PSS is split over its n mappings
	// (smaps rounds each VMA's sum down to a kB), or over more when other
	// processes on the machine hold the same anchors.
	if pss1 > zoneKBs+2*int64(e.w.Config.NLayer)*n {
		t.Fatalf("after KSM: zones' PSS %d kB, want about %d (one copy)", pss1, zoneKBs)
	}
	if drop := roll0 - roll1; drop < (n-1)*zoneKBs/2 {
		t.Fatalf("process PSS dropped by %d kB, want at least half of %d", drop, (n-1)*zoneKBs)
	}

	for _, s := range ss[1:] {
		s.Close()
	}
	if ss[0].kv.Mergeable() {
		t.Fatal("one session left: still mergeable")
	}
	if perProc { // ksmd drops the unmapped and unmergeable pages from its count as it scans
		var m int64
		scans = k.until(func() bool { m, _ = mergingPages("self"); return m == 0 }, 8)
		if m != 0 {
			t.Fatalf("one session left: %d pages of this process still merged after %d full scans", m, scans)
		}
		return
	}
	got, scans = k.wait(func(v int64) bool { return v <= base }, 8)
	if got > base {
		t.Fatalf("one session left: pages_sharing %d after %d full scans, want ≤ %d", got, scans, base)
	}
}
