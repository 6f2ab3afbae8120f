package update

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// TUF's attack list (theupdateframework.io/docs/security), each against a
// repository served by a loopback HTTP server the test starts, plus the
// reproductions of issue #27.

func TestUpdateAndRebootAcceptsEqual(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	r.publish(t, "fleet", variant(t, 2))
	srv := newServer(t, r.PublishedDir())
	state := t.TempDir()
	c := device(t, srv.URL, r.rootBytes(t), state, "fleet", r.clk, nil)
	if lg, _ := c.LastGood(); lg != nil {
		t.Fatalf("fresh state has a last-good module: %+v", lg.Custom)
	}
	u := accept(t, c)
	if u.Revision != 2 || !u.Changed {
		t.Fatalf("first check: revision %d changed %v, want 2 true", u.Revision, u.Changed)
	}
	c.Close()
	// Reboot, offline: the last-good module verifies from the state alone.
	c2 := device(t, "http://127.0.0.1:1/unreachable", r.rootBytes(t), state, "fleet", r.clk, func(o *Options) { o.Timeout = time.Second })
	lg, err := c2.LastGood()
	if err != nil || lg == nil || lg.Revision != 2 || !strings.Contains(string(lg.Wasm), "rev") {
		t.Fatalf("reboot: last good %+v, %v; want revision 2", lg, err)
	}
	if _, err := c2.Check(context.Background()); err == nil {
		t.Fatal("check against an unreachable repository succeeded")
	}
	c2.Close()
	// Reboot online with the same revision: accepted, unchanged.
	c3 := device(t, srv.URL, r.rootBytes(t), state, "fleet", r.clk, nil)
	u = accept(t, c3)
	if u.Revision != 2 || u.Changed {
		t.Fatalf("reboot check: revision %d changed %v, want 2 false (equal versions are accepted)", u.Revision, u.Changed)
	}
}

func TestArbitraryBundle(t *testing.T) {
	r := newRepo(t, InitOptions{})
	c1 := r.publish(t, "fleet", variant(t, 1))
	srv := newServer(t, r.PublishedDir())
	evil := variant(t, 9) // same length: only the hash tells
	srv.serveBytes("targets/"+c1.SHA256+".fleet.wasm", evil)
	c := device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, nil)
	_, err := c.Check(context.Background())
	if err == nil {
		t.Fatal("a module that is not the signed one was accepted")
	}
	var lm *metadata.ErrLengthOrHashMismatch
	if !errors.As(err, &lm) {
		t.Fatalf("want a length/hash mismatch, got %v", err)
	}
	// Forged metadata, signed by a key the root does not list.
	forged := metadata.Targets(r.clk.Now().Add(time.Hour))
	forged.Signed.Version = r.targets.Signed.Version // the name the snapshot points to
	fk := FileKeyring{Dir: t.TempDir()}
	k, _ := fk.NewKey()
	id, _ := k.ID()
	s, _ := fk.Signer(id)
	forged.Sign(s)
	data, _ := forged.ToBytes(false)
	srv.override("targets/"+c1.SHA256+".fleet.wasm", nil)
	srv.serveBytes(fmt.Sprintf("%d.targets.json", forged.Signed.Version), data)
	c = device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, nil)
	_, err = c.Check(context.Background())
	var uns *metadata.ErrUnsignedMetadata
	if !errors.As(err, &uns) {
		t.Fatalf("forged targets: want an unsigned-metadata error, got %v", err)
	}
}

func TestRollbackAttack(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	old := t.TempDir()
	copyDir(t, r.PublishedDir(), old) // the repository as it was at revision 1
	r.publish(t, "fleet", variant(t, 2))
	srv := newServer(t, r.PublishedDir())
	c := device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, nil)
	if u := accept(t, c); u.Revision != 2 {
		t.Fatalf("revision %d", u.Revision)
	}
	// The attacker serves the old, validly signed, unexpired repository.
	srvOld := newServer(t, old)
	c.o.Repo = srvOld.URL
	_, err := c.Check(context.Background())
	var bad *metadata.ErrBadVersionNumber
	if !errors.As(err, &bad) {
		t.Fatalf("old repository: want a version rollback error, got %v", err)
	}
	if lg, _ := c.LastGood(); lg.Revision != 2 {
		t.Fatalf("last good revision %d after the attack, want 2", lg.Revision)
	}
	// The repository itself signs a lower revision (an operator mistake,
	// or online keys misused): the device's own floor refuses it.
	tg := r.cloneTargets()
	tg.Signed.Targets[TargetPath("fleet")] = mustTarget(t, old, "fleet")
	r.staged = tg
	if err := r.Publish(Expiries{}); err != nil {
		t.Fatal(err)
	}
	c.o.Repo = srv.URL
	if _, err := c.Check(context.Background()); !errors.Is(err, ErrRollback) {
		t.Fatalf("signed revision 1 after 2: want ErrRollback, got %v", err)
	}
}

// mustTarget is name's target entry in the published directory dir.
func mustTarget(t *testing.T, dir, name string) *metadata.TargetFiles {
	t.Helper()
	ts, err := metadata.Timestamp().FromFile(filepath.Join(dir, "timestamp.json"))
	if err != nil {
		t.Fatal(err)
	}
	sn, err := metadata.Snapshot().FromFile(filepath.Join(dir, fmt.Sprintf("%d.snapshot.json", ts.Signed.Meta["snapshot.json"].Version)))
	if err != nil {
		t.Fatal(err)
	}
	tg, err := metadata.Targets().FromFile(filepath.Join(dir, fmt.Sprintf("%d.targets.json", sn.Signed.Meta["targets.json"].Version)))
	if err != nil {
		t.Fatal(err)
	}
	return tg.Signed.Targets[TargetPath(name)]
}

func TestIndefiniteFreeze(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	srv := newServer(t, r.PublishedDir())
	c := device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, nil)
	accept(t, c)
	// The repository is frozen: the operator publishes revision 2, the
	// attacker keeps serving yesterday's files. Within the timestamp's
	// expiry the device cannot tell; past it, it refuses.
	frozen := t.TempDir()
	copyDir(t, r.PublishedDir(), frozen)
	r.publish(t, "fleet", variant(t, 2))
	fsrv := newServer(t, frozen)
	c.o.Repo = fsrv.URL
	if _, err := c.Check(context.Background()); err != nil {
		t.Fatalf("within the timestamp expiry: %v", err)
	}
	r.clk.Advance(DefaultExpiries().Timestamp + time.Minute)
	_, err := c.Check(context.Background())
	var exp *metadata.ErrExpiredMetadata
	if !errors.As(err, &exp) {
		t.Fatalf("past the timestamp expiry: want an expired-metadata error, got %v", err)
	}
	// The real repository, re-signed by the operator, is accepted again.
	if err := r.Publish(Expiries{}); err != nil {
		t.Fatal(err)
	}
	c.o.Repo = srv.URL
	if u := accept(t, c); u.Revision != 2 {
		t.Fatalf("after the freeze: revision %d, want 2", u.Revision)
	}
}

// smallLimits make the memory bound small enough to measure.
func smallLimits() Limits {
	return Limits{Root: 16 << 10, Timestamp: 4 << 10, Snapshot: 16 << 10, Targets: 64 << 10, Module: 256 << 10, MaxRootRotations: 4}
}

func TestEndlessDataBounded(t *testing.T) {
	r := newRepo(t, InitOptions{})
	c1 := r.publish(t, "fleet", variant(t, 1))
	srv := newServer(t, r.PublishedDir())
	endless := func(w http.ResponseWriter, req *http.Request) {
		buf := make([]byte, 32<<10)
		for i := range buf {
			buf[i] = '{'
		}
		for req.Context().Err() == nil {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	}
	lim := smallLimits()
	c := device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, func(o *Options) { o.Limits = lim })
	for _, path := range []string{"timestamp.json", "2.root.json", "2.snapshot.json", "2.targets.json", "targets/" + c1.SHA256 + ".fleet.wasm"} {
		srv.override(path, endless)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		_, err := c.Check(context.Background())
		runtime.ReadMemStats(&ms1)
		srv.override(path, nil)
		if err == nil {
			t.Fatalf("%s: endless data accepted", path)
		}
		st := c.Stats()
		// The bound (Limits doc): the transport reads at most Bound()
		// bytes per check, and a file at most its limit + 1.
		if st.LastCheckBytes > lim.Bound() {
			t.Fatalf("%s: read %d bytes in one check, bound %d", path, st.LastCheckBytes, lim.Bound())
		}
		// Memory: the check allocates O(what it read): the bounded reads
		// double their buffer at most ~log2(limit/64K) times, plus
		// go-tuf's parsing of the small real files. 4x the bound covers
		// both; an unbounded read of the endless body would not stop.
		if alloc := int64(ms1.TotalAlloc - ms0.TotalAlloc); alloc > 4*lim.Bound() {
			t.Fatalf("%s: one check allocated %d bytes, bound 4*%d", path, alloc, lim.Bound())
		}
		t.Logf("%s: %v; read %d bytes (bound %d), allocated %d", path, err, st.LastCheckBytes, lim.Bound(), ms1.TotalAlloc-ms0.TotalAlloc)
	}
}

func TestSlowRetrievalBounded(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	srv := newServer(t, r.PublishedDir())
	srv.override("timestamp.json", func(w http.ResponseWriter, req *http.Request) {
		for req.Context().Err() == nil {
			w.Write([]byte(" "))
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	})
	const timeout = 300 * time.Millisecond
	c := device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, func(o *Options) { o.Timeout = timeout })
	start := time.Now()
	_, err := c.Check(context.Background())
	el := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow repository: want the check's deadline, got %v", err)
	}
	// The check ends at its deadline; 30x is room for a loaded machine,
	// not a tolerance on the deadline itself (an unbounded read never
	// returns).
	if el > 30*timeout {
		t.Fatalf("slow repository: check took %v, timeout %v", el, timeout)
	}
}

func TestMixAndMatch(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	r.publish(t, "other", variant(t, 7))
	r.publish(t, "fleet", variant(t, 2))
	srv := newServer(t, r.PublishedDir())
	// The newest snapshot names targets version N; the attacker serves
	// an older, validly signed targets file under that name.
	tv := r.snapshot.Signed.Meta["targets.json"].Version
	older, err := os.ReadFile(filepath.Join(r.PublishedDir(), fmt.Sprintf("%d.targets.json", tv-1)))
	if err != nil {
		t.Fatal(err)
	}
	srv.serveBytes(fmt.Sprintf("%d.targets.json", tv), older)
	c := device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, nil)
	_, err = c.Check(context.Background())
	var bad *metadata.ErrBadVersionNumber
	if !errors.As(err, &bad) {
		t.Fatalf("mixed targets version: want a version mismatch, got %v", err)
	}
}

// forgeTargets signs targets offering evil as name with the given keys,
// and a snapshot and timestamp for it with the repository's own snapshot
// and timestamp keys (the attacker holds those too), and serves them.
func forgeTargets(t *testing.T, r *testRepo, srv *server, name string, rev int64, evil []byte, targetsKeys []string) {
	t.Helper()
	tg := r.cloneTargets()
	tg.Signed.Version = r.targets.Signed.Version + 1
	tg.Signed.Expires = r.clk.Now().Add(time.Hour)
	tf, _ := metadata.TargetFile().FromBytes(TargetPath(name), evil, "sha256")
	sum := sha256.Sum256(evil)
	raw := []byte(fmt.Sprintf(`{"edgellm":{"name":%q,"revision":%d,"abi":"1.0","abi_min":"1.0","abi_max":"1.x","module_sha256":%q,"min_engine_version":"0.0.0"}}`, name, rev, hex.EncodeToString(sum[:])))
	rm := jsonRaw(raw)
	tf.Custom = &rm
	tg.Signed.Targets[TargetPath(name)] = tf
	for _, id := range targetsKeys {
		s, err := r.Keys.Signer(id)
		if err != nil {
			t.Fatal(err)
		}
		tg.Sign(s)
	}
	snap := metadata.Snapshot(r.clk.Now().Add(time.Hour))
	snap.Signed.Version = r.snapshot.Signed.Version + 1
	snap.Signed.Meta["targets.json"] = metadata.MetaFile(tg.Signed.Version)
	ts := metadata.Timestamp(r.clk.Now().Add(time.Hour))
	ts.Signed.Version = r.timestamp.Signed.Version + 1
	ts.Signed.Meta["snapshot.json"] = metadata.MetaFile(snap.Signed.Version)
	for role, md := range map[string]interface {
		Sign(Signer) (*metadata.Signature, error)
	}{RoleSnapshot: snap, RoleTimestamp: ts} {
		for _, id := range r.root.Signed.Roles[role].KeyIDs {
			s, _ := r.Keys.Signer(id)
			md.Sign(s)
		}
	}
	b := func(m bytesMeta) []byte { d, _ := m.ToBytes(false); return d }
	srv.serveBytes(fmt.Sprintf("%d.targets.json", tg.Signed.Version), b(tg))
	srv.serveBytes(fmt.Sprintf("%d.snapshot.json", snap.Signed.Version), b(snap))
	srv.serveBytes("timestamp.json", b(ts))
	srv.serveBytes("targets/"+hex.EncodeToString(sum[:])+"."+TargetPath(name), evil)
}

func TestKeyCompromiseBelowThreshold(t *testing.T) {
	r := newRepo(t, InitOptions{TargetsKeys: 2, TargetsThreshold: 2})
	r.publish(t, "fleet", variant(t, 1))
	srv := newServer(t, r.PublishedDir())
	c := device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, nil)
	accept(t, c)
	keys := r.root.Signed.Roles[RoleTargets].KeyIDs
	forgeTargets(t, r, srv, "fleet", 99, variant(t, 666), keys[:1])
	_, err := c.Check(context.Background())
	var uns *metadata.ErrUnsignedMetadata
	if !errors.As(err, &uns) {
		t.Fatalf("one of two targets keys: want an unsigned-metadata error, got %v", err)
	}
	// Control: with both keys the forgery verifies (so the test above
	// failed for the threshold, not for a broken forgery).
	forgeTargets(t, r, srv, "fleet", 99, variant(t, 666), keys)
	if u, err := c.Check(context.Background()); err != nil || u.Revision != 99 {
		t.Fatalf("control with the threshold met: %v", err)
	}
}

func TestRootRotation(t *testing.T) {
	r := newRepo(t, InitOptions{RootKeys: 2, RootThreshold: 2})
	r.publish(t, "fleet", variant(t, 1))
	srv := newServer(t, r.PublishedDir())
	shipped := r.rootBytes(t) // what the app shipped: root version 1
	c := device(t, srv.URL, shipped, t.TempDir(), "fleet", r.clk, nil)
	accept(t, c)
	oldRoot := append([]string(nil), r.root.Signed.Roles[RoleRoot].KeyIDs...)
	if _, err := r.RotateKey(RoleRoot, oldRoot[0], Expiries{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RotateKey(RoleTargets, "", Expiries{}); err != nil {
		t.Fatal(err)
	}
	r.publish(t, "fleet", variant(t, 2))
	u := accept(t, c) // no restart
	if u.Revision != 2 || u.RootVersion != 3 {
		t.Fatalf("after rotation: revision %d root %d, want 2 and 3", u.Revision, u.RootVersion)
	}
	// A new device with the old shipped root chains to the new one.
	c2 := device(t, srv.URL, shipped, t.TempDir(), "fleet", r.clk, nil)
	if u := accept(t, c2); u.RootVersion != 3 {
		t.Fatalf("fresh device: root version %d, want 3", u.RootVersion)
	}
	// A root version 4 signed only by the rotated-out key is refused.
	next := r.nextRoot(Expiries{})
	s, _ := r.Keys.Signer(oldRoot[0])
	next.Sign(s)
	data, _ := next.ToBytes(false)
	srv.serveBytes("4.root.json", data)
	_, err := c.Check(context.Background())
	var uns *metadata.ErrUnsignedMetadata
	if !errors.As(err, &uns) {
		t.Fatalf("root signed by a rotated-out key: want unsigned-metadata, got %v", err)
	}
}

func TestRevokedKeyNextCheck(t *testing.T) {
	r := newRepo(t, InitOptions{TargetsKeys: 2, TargetsThreshold: 1})
	r.publish(t, "fleet", variant(t, 1))
	srv := newServer(t, r.PublishedDir())
	c := device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, nil)
	accept(t, c)
	bad := r.root.Signed.Roles[RoleTargets].KeyIDs[0]
	if err := r.Revoke(bad, Expiries{}); err != nil {
		t.Fatal(err)
	}
	accept(t, c) // the device learns the new root at its next check
	// The revoked key signs a bundle: refused without a restart.
	forgeTargets(t, r, srv, "fleet", 50, variant(t, 666), []string{bad})
	_, err := c.Check(context.Background())
	var uns *metadata.ErrUnsignedMetadata
	if !errors.As(err, &uns) {
		t.Fatalf("bundle signed by a revoked key: want unsigned-metadata, got %v", err)
	}
	if lg, _ := c.LastGood(); lg.Revision != 1 {
		t.Fatalf("last good %d", lg.Revision)
	}
}

func TestFastForwardRecovery(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	srv := newServer(t, r.PublishedDir())
	c := device(t, srv.URL, r.rootBytes(t), t.TempDir(), "fleet", r.clk, nil)
	accept(t, c)
	// The attacker holds every online key (targets, snapshot, timestamp)
	// and fast-forwards the device to revision 1000.
	forgeTargets(t, r, srv, "fleet", 1000, variant(t, 666), r.root.Signed.Roles[RoleTargets].KeyIDs)
	if u := accept(t, c); u.Revision != 1000 {
		t.Fatalf("compromise: revision %d", u.Revision)
	}
	srv.clear()
	// Revision 2 is now a rollback for the device.
	r.publish(t, "fleet", variant(t, 2))
	// (The device either keeps the forged, equal-version timestamp or
	// refuses the rollback: it never takes revision 2.)
	if u, err := c.Check(context.Background()); err == nil && u.Revision != 1000 {
		t.Fatalf("after a fast-forward to 1000, before recovery: revision %d accepted", u.Revision)
	}
	// Recovery: the operator rotates every online key.
	for _, role := range []string{RoleTargets, RoleSnapshot, RoleTimestamp} {
		if _, err := r.RotateKey(role, "", Expiries{}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := c.Check(context.Background())
	if err != nil {
		t.Fatalf("after rotating the online keys: %v", err)
	}
	if u.Revision != 2 || !u.Lower || !u.Changed {
		t.Fatalf("recovery: revision %d lower %v changed %v, want 2 true true", u.Revision, u.Lower, u.Changed)
	}
	if err := c.Commit(u); err != nil {
		t.Fatal(err)
	}
}

func jsonRaw(b []byte) json.RawMessage { return json.RawMessage(b) }
