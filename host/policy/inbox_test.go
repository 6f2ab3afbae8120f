package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// inboxDelivery is one bundle for the inbox: written to staging and renamed
// in (the contract), or written in place (a writer that breaks it).
type inboxDelivery struct {
	name    string
	staged  string // "" = write data in place
	data    []byte
	goodRev int64 // > 0 for a good bundle
}

func (d inboxDelivery) deliver(t *testing.T, inbox string) {
	dst := filepath.Join(inbox, d.name)
	if d.staged == "" {
		if err := os.WriteFile(dst, d.data, 0o644); err != nil {
			t.Error(err)
		}
		return
	}
	if err := os.Rename(d.staged, dst); err != nil {
		t.Error(err)
	}
}

// TestInbox1000 delivers 1,000 good bundles interleaved with 100 bad ones
// (garbage, partial written in place, signed by an untrusted key, expired,
// older, tampered) to an inbox while a loop calls Decide as a generation
// would: no failed step, no bad bundle ever in service, the revision never
// goes back, the final revision is the highest good one, and the memory
// after all deliveries is at most 1.1x the memory after the first 50.
func TestInbox1000(t *testing.T) {
	const good, badEvery = 1000, 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, stranger := newSigner(t), newSigner(t)
	now := time.Now()
	// Generous deadline: this test is about swaps; a descheduled call on a
	// loaded 2-core machine would be a (correctly handled) deadline failure.
	r := newRuntime(t, testConfig().WithInsecure(false).WithTrustedKey(s.pub).
		WithStateDir(t.TempDir()).WithDeadline(2*time.Second).WithReloadDebounce(2*time.Millisecond))
	root := t.TempDir()
	inbox, staging := filepath.Join(root, "inbox"), filepath.Join(root, "staging")
	os.Mkdir(inbox, 0o755)
	os.Mkdir(staging, 0o755)

	// Make every bundle first, on disk, so the memory measured is the
	// runtime's, not the test's.
	wasm := [2][]byte{}
	for i, name := range []string{"good_a", "good_b"} {
		wasm[i], _ = os.ReadFile(fixture(t, name))
	}
	sign := func(name string, rev int64, fix int, priv []byte, expires string) string {
		b, err := SignBundle(wasm[fix], Manifest{Name: "fleet", Revision: rev, ABIVersion: "1.0", MinEngineVersion: "0.0.0", Expires: expires}, priv)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(staging, name)
		if err := b.Write(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var plan []inboxDelivery
	bad := 0
	for rev := int64(2); rev <= good+1; rev++ {
		name := "good-" + strconv.FormatInt(rev, 10) + ".tar.gz"
		plan = append(plan, inboxDelivery{name: name, staged: sign(name, rev, int(rev%2), s.priv, now.Add(time.Hour).Format(time.RFC3339)), goodRev: rev})
		if rev%badEvery != 0 {
			continue
		}
		// Bad bundles: those with a signature carry revisions above every
		// good one, so that loading one would show in the final revision.
		name = fmt.Sprintf("bad-%03d.tar.gz", bad)
		high := int64(100000 + bad)
		d := inboxDelivery{name: name}
		switch bad % 6 {
		case 0: // garbage, renamed in
			d.staged = filepath.Join(staging, name)
			os.WriteFile(d.staged, []byte("\x1f\x8bnot really gzip"), 0o644)
		case 1: // partial: a writer that breaks the contract writes in place
			full, _ := os.ReadFile(sign(name, high, 0, s.priv, ""))
			d.data = full[:len(full)/2]
		case 2: // signed by a key the device does not trust
			d.staged = sign(name, high, 0, stranger.priv, "")
		case 3: // expired
			d.staged = sign(name, high, 0, s.priv, now.Add(-time.Hour).Format(time.RFC3339))
		case 4: // older than what is in service
			d.staged = sign(name, rev/2, 0, s.priv, "")
		case 5: // module tampered with after signing
			p := sign(name, high, 0, s.priv, "")
			b, err := ReadBundle(p, NewConfig().bundle)
			if err != nil {
				t.Fatal(err)
			}
			b.Wasm = append([]byte(nil), b.Wasm...)
			b.Wasm[len(b.Wasm)-1] ^= 0x01
			if err := b.Write(p); err != nil {
				t.Fatal(err)
			}
			d.staged = p
		}
		plan = append(plan, d)
		bad++
	}
	if bad != good/badEvery {
		t.Fatalf("%d bad bundles planned", bad)
	}

	// Revision 1 is in service before the generation starts.
	first := filepath.Join(root, "first.tar.gz")
	signBundle(t, "good_b", Manifest{Name: "fleet", Revision: 1}, s.priv, first)
	if err := r.LoadFile(ctx, first); err != nil {
		t.Fatal(err)
	}
	in, err := r.WatchInbox(ctx, inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()

	// The generation: one Decide per step, as the adapter does.
	var (
		stop      atomic.Bool
		steps     atomic.Int64
		failed    atomic.Int64
		backwards atomic.Int64
		wg        sync.WaitGroup
		firstFail atomic.Value
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := int64(0)
		for !stop.Load() {
			sens, d := testSensors(), current()
			res, err := r.Decide(ctx, &sens, &d)
			if err != nil || res.Outcome != OutcomeOK {
				failed.Add(1)
				firstFail.CompareAndSwap(nil, fmt.Sprintf("step %d: %v %v", steps.Load(), res.Outcome, err))
			}
			if rev := r.Revision(); rev < last {
				backwards.Add(1)
			} else {
				last = rev
			}
			steps.Add(1)
			time.Sleep(50 * time.Microsecond)
		}
	}()

	// settle waits for rev in service and n entries dealt with (loaded,
	// superseded or refused; an older bundle that arrives in the same scan
	// as a newer one is superseded rather than refused).
	settle := func(rev int64, n int) {
		waitFor(t, 60*time.Second, fmt.Sprintf("revision %d and %d entries handled", rev, n), func() bool {
			st := in.Stats()
			return r.Revision() == rev && st.Loaded+st.Superseded+st.Refused >= uint64(n)
		})
	}
	memory := func() (heap, rss uint64) {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, readRSS(t)
	}
	start := time.Now()
	goodSeen, i := 0, 0
	for ; goodSeen < 50; i++ {
		plan[i].deliver(t, inbox)
		if plan[i].goodRev > 0 {
			goodSeen++
		}
	}
	settle(plan[i-1].goodRev, i)
	heap50, rss50 := memory()
	// The rest in bursts of ten good and one bad, each burst waited for,
	// so that about a hundred of them are swapped in during the generation.
	for ; i < len(plan); i++ {
		plan[i].deliver(t, inbox)
		if plan[i].goodRev == 0 {
			settle(plan[i-1].goodRev, i+1)
		}
	}
	settle(good+1, len(plan))
	elapsed := time.Since(start)
	heapEnd, rssEnd := memory()
	stop.Store(true)
	wg.Wait()

	st, ist := r.Stats(), in.Stats()
	t.Logf("%d good + %d bad bundles in %v; %d decode steps; inbox %+v; heap %d -> %d B (x%.3f), RSS %d -> %d kB (x%.3f)",
		good, bad, elapsed, steps.Load(), ist, heap50, heapEnd, float64(heapEnd)/float64(heap50), rss50>>10, rssEnd>>10, float64(rssEnd)/float64(rss50))
	if n := failed.Load(); n != 0 {
		t.Errorf("%d failed decode steps (first: %v)", n, firstFail.Load())
	}
	if backwards.Load() != 0 {
		t.Errorf("the revision in service went back %d times", backwards.Load())
	}
	if r.Revision() != good+1 || decideOK(t, r).Tier != int32(1+(good+1)%2) {
		t.Errorf("final revision %d, want %d", r.Revision(), good+1)
	}
	if st.Failures != 0 {
		t.Errorf("%d module failures", st.Failures)
	}
	// Each burst after the first 50 was waited for with a new revision: at
	// least one load per burst.
	if ist.Loaded < uint64(bad)*9/10 || ist.Loaded > good || ist.Refused < uint64(bad)*5/6 {
		t.Errorf("inbox loaded %d, superseded %d, refused %d: want ≥ %d loads and the %d bad bundles other than the older ones refused", ist.Loaded, ist.Superseded, ist.Refused, bad*9/10, bad*5/6)
	}
	if float64(heapEnd) > 1.1*float64(heap50) {
		t.Errorf("Go heap grew from %d to %d bytes (> 1.1x)", heap50, heapEnd)
	}
	if float64(rssEnd) > 1.1*float64(rss50) {
		t.Errorf("RSS grew from %d to %d kB (> 1.1x)", rss50>>10, rssEnd>>10)
	}
	// Everything is left in place.
	ents, _ := os.ReadDir(inbox)
	if len(ents) != len(plan) {
		t.Errorf("inbox holds %d entries, %d delivered", len(ents), len(plan))
	}
}

// readRSS is the process's resident set size from /proc/self/status.
func readRSS(t *testing.T) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

func TestInboxIgnoresInProgressAndSymlinks(t *testing.T) {
	ctx := context.Background()
	s := newSigner(t)
	r := newRuntime(t, testConfig().WithInsecure(false).WithTrustedKey(s.pub).WithReloadDebounce(time.Millisecond))
	inbox, other := t.TempDir(), t.TempDir()
	signBundle(t, "good_a", Manifest{Name: "p", Revision: 3}, s.priv, filepath.Join(inbox, ".b3.tar.gz"))
	signBundle(t, "good_a", Manifest{Name: "p", Revision: 4}, s.priv, filepath.Join(inbox, "b4.tar.gz.part"))
	signBundle(t, "good_a", Manifest{Name: "p", Revision: 5}, s.priv, filepath.Join(other, "b5.tar.gz"))
	os.Symlink(filepath.Join(other, "b5.tar.gz"), filepath.Join(inbox, "b5.tar.gz"))
	in, err := r.WatchInbox(ctx, inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if r.Revision() != 0 || in.Stats().Ignored != 1 {
		t.Fatalf("revision %d, stats %+v", r.Revision(), in.Stats())
	}
	// The contract: rename in. A bundle directory works too.
	signBundle(t, "good_b", Manifest{Name: "p", Revision: 6}, s.priv, filepath.Join(other, "b6"))
	if err := os.Rename(filepath.Join(other, "b6"), filepath.Join(inbox, "b6")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "revision 6", func() bool { return r.Revision() == 6 })
	if _, err := r.WatchInbox(ctx, filepath.Join(inbox, "missing")); err == nil {
		t.Fatal("inbox on a missing directory")
	}
}

// TestInboxFIFONeverBlocks: a FIFO named like a bundle (issue #27: it
// wedged the host) is ignored without being opened; a good bundle in the
// same scan still loads.
func TestInboxFIFONeverBlocks(t *testing.T) {
	s := newSigner(t)
	r := newRuntime(t, testConfig().WithInsecure(false).WithTrustedKey(s.pub).WithReloadDebounce(time.Millisecond))
	inbox := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(inbox, "x.tar.gz"), 0o644); err != nil {
		t.Fatal(err)
	}
	signBundle(t, "good_a", Manifest{Name: "p", Revision: 3}, s.priv, filepath.Join(inbox, "b3.tar.gz"))
	done := make(chan *Inbox, 1)
	go func() {
		in, err := r.WatchInbox(context.Background(), inbox)
		if err != nil {
			t.Error(err)
		}
		done <- in
	}()
	select {
	case in := <-done:
		if in == nil {
			return
		}
		defer in.Close()
		if r.Revision() != 3 || in.Stats().Ignored != 1 {
			t.Fatalf("revision %d, stats %+v; want 3 and the FIFO ignored", r.Revision(), in.Stats())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a FIFO in the inbox blocked the scan")
	}
}
