package update

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/policy"
)

// The reproductions of issue #27, each as it was reported.

// A FIFO (or a symlink) in a directory repository is refused at once, not
// opened blocking.
func TestDirRepoFIFONeverBlocks(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	dir := t.TempDir()
	copyDir(t, r.PublishedDir(), dir)
	c := device(t, dir, r.rootBytes(t), t.TempDir(), "fleet", r.clk, func(o *Options) { o.Timeout = time.Minute })
	if u := accept(t, c); u.Revision != 1 {
		t.Fatalf("directory repository: revision %d", u.Revision)
	}
	ts := filepath.Join(dir, "timestamp.json")
	os.Remove(ts)
	if err := syscall.Mkfifo(ts, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.Check(context.Background()); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("FIFO timestamp.json: want ErrNotRegular, got %v", err)
		}
	case <-time.After(30 * time.Second): // the check's own timeout is a minute
		t.Fatal("a FIFO in the repository blocked the update check")
	}
	os.Remove(ts)
	os.Symlink("/dev/zero", ts)
	if _, err := c.Check(context.Background()); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("symlink timestamp.json: want ErrNotRegular, got %v", err)
	}
}

func TestReadRegularFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, make([]byte, 100), 0o644)
	if b, err := ReadRegularFile(p, 100); err != nil || len(b) != 100 {
		t.Fatalf("100 bytes, limit 100: %d, %v", len(b), err)
	}
	if _, err := ReadRegularFile(p, 99); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("100 bytes, limit 99: %v", err)
	}
	for _, dev := range []string{"/dev/zero", "/dev/null"} {
		if _, err := ReadRegularFile(dev, 1<<20); !errors.Is(err, ErrNotRegular) {
			t.Fatalf("%s: want ErrNotRegular, got %v", dev, err)
		}
	}
	if _, err := ReadRegularFile(dir, 1<<20); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("a directory: want ErrNotRegular, got %v", err)
	}
}

// Two processes (here: two clients, each with its own open file
// description, as two processes have) on one state directory: the second
// is refused with a clear error while the first holds it.
func TestStateDirLock(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	state := t.TempDir()
	c := device(t, r.PublishedDir(), r.rootBytes(t), state, "fleet", r.clk, nil)
	_, err := Open(Options{Repo: r.PublishedDir(), TrustedRoot: r.rootBytes(t), StateDir: state, Name: "fleet", Now: r.clk.Now})
	if !errors.Is(err, ErrStateLocked) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second client on one state dir: want ErrStateLocked naming the pid, got %v", err)
	}
	c.Close()
	c2 := device(t, r.PublishedDir(), r.rootBytes(t), state, "fleet", r.clk, nil)
	accept(t, c2)
}

// Deleting the rollback state, or leaving a dangling symlink or a FIFO in
// its place, is refused; it never re-allows old revisions silently.
func TestDeletedRollbackState(t *testing.T) {
	r := newRepo(t, InitOptions{})
	r.publish(t, "fleet", variant(t, 1))
	old := t.TempDir()
	copyDir(t, r.PublishedDir(), old)
	r.publish(t, "fleet", variant(t, 2))
	open := func(state, repo string) (*Client, error) {
		return Open(Options{Repo: repo, TrustedRoot: r.rootBytes(t), StateDir: state, Name: "fleet", Now: r.clk.Now})
	}
	prepare := func() string {
		state := t.TempDir()
		c, err := open(state, r.PublishedDir())
		if err != nil {
			t.Fatal(err)
		}
		accept(t, c)
		c.Close()
		return state
	}
	// timestamp.json deleted: refused at open.
	state := prepare()
	os.Remove(filepath.Join(state, metaDir, "timestamp.json"))
	if _, err := open(state, old); !errors.Is(err, ErrStateDamaged) {
		t.Fatalf("deleted timestamp.json: want ErrStateDamaged, got %v", err)
	}
	// lastgood.json a dangling symlink: refused.
	state = prepare()
	lg := filepath.Join(state, lastGoodFile)
	os.Remove(lg)
	os.Symlink(filepath.Join(state, "nowhere"), lg)
	if _, err := open(state, old); !errors.Is(err, ErrStateDamaged) {
		t.Fatalf("dangling lastgood.json: want ErrStateDamaged, got %v", err)
	}
	// lastgood.json deleted: TUF's own metadata still holds the floor.
	state = prepare()
	os.Remove(lg)
	os.Remove(filepath.Join(state, lastGoodFile))
	c, err := open(state, old)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if u, err := c.Check(context.Background()); err == nil {
		t.Fatalf("no lastgood.json, old repository: revision %d accepted", u.Revision)
	}
	// A FIFO in the trusted metadata: refused, not read.
	c.Close()
	state = prepare()
	os.Remove(filepath.Join(state, metaDir, "snapshot.json"))
	syscall.Mkfifo(filepath.Join(state, metaDir, "snapshot.json"), 0o644)
	c, err = open(state, r.PublishedDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Check(context.Background()); !errors.Is(err, ErrStateDamaged) {
		t.Fatalf("FIFO snapshot.json in the state: want ErrStateDamaged, got %v", err)
	}
}

// Cross-name replay: a device pinned to "fleet" never takes the target
// of another name, even one signed for its path.
func TestCrossNameReplay(t *testing.T) {
	r := newRepo(t, InitOptions{})
	for i := 1; i <= 5; i++ {
		r.publish(t, "fleet", variant(t, i))
	}
	r.publish(t, "fleet-debug", variant(t, 100))
	c := device(t, r.PublishedDir(), r.rootBytes(t), t.TempDir(), "fleet", r.clk, nil)
	if u := accept(t, c); u.Name != "fleet" || u.Revision != 5 {
		t.Fatalf("pinned to fleet: got %s revision %d", u.Name, u.Revision)
	}
	// fleet-debug's entry placed at fleet's path (a repository mistake
	// or a replay by someone who holds the online keys): refused by name.
	tg := r.cloneTargets()
	tg.Signed.Targets[TargetPath("fleet")] = tg.Signed.Targets[TargetPath("fleet-debug")]
	r.staged = tg
	if err := r.Publish(Expiries{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), `names policy "fleet-debug"`) {
		t.Fatalf("fleet-debug under fleet's path: want a name refusal, got %v", err)
	}
	// A device pinned to a name the repository does not offer.
	c2 := device(t, r.PublishedDir(), r.rootBytes(t), t.TempDir(), "kiosk", r.clk, nil)
	if _, err := c2.Check(context.Background()); !errors.Is(err, ErrNotOffered) {
		t.Fatalf("unoffered name: want ErrNotOffered, got %v", err)
	}
}

// The signing defects: out-of-range expiries, already-expired
// signatures, the signer's ABI instead of the module's, modules every host
// refuses.
func TestPublishRefusals(t *testing.T) {
	for _, s := range []string{"200000d", "0d", "-1d", "1e9h", "x"} {
		if d, err := ParseExpiry(s); err == nil {
			if (Expiries{Root: d, Targets: d, Snapshot: d, Timestamp: d}).Check() == nil {
				t.Fatalf("expiry %q accepted (%v)", s, d)
			}
		}
	}
	if err := (Expiries{Root: 365 * 24 * time.Hour, Targets: 24 * time.Hour, Snapshot: 24 * time.Hour, Timestamp: 400 * 24 * time.Hour}).Check(); err == nil {
		t.Fatal("a 400-day timestamp accepted")
	}
	r := newRepo(t, InitOptions{})
	ctx := context.Background()
	cfg := testPolicyConfig()
	for _, c := range []struct {
		name string
		wasm []byte
		want error
	}{
		{"abi2", fixture(t, "abi2"), policy.ErrABIVersion},
		{"bad_import", fixture(t, "bad_import"), policy.ErrUnknownImport},
		{"not wasm", []byte("#!/bin/sh\nnot a module\n"), policy.ErrNotPolicy},
		{"huge", append(fixture(t, "good_a"), make([]byte, 52<<20)...), policy.ErrBundleTooLarge},
	} {
		if _, err := AddModule(ctx, r.Repo, cfg, c.wasm, AddOptions{Name: "fleet"}); !errors.Is(err, c.want) {
			t.Fatalf("%s: want %v, got %v", c.name, c.want, err)
		}
	}
	if len(r.Targets()) != 0 {
		t.Fatal("a refused module was staged")
	}
	// The module's ABI, not the signer's, is recorded.
	cu, err := AddModule(ctx, r.Repo, cfg, fixture(t, "good_a"), AddOptions{Name: "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	if cu.ABI != "1.0" {
		t.Fatalf("recorded ABI %s, good_a speaks 1.0", cu.ABI)
	}
	if _, err := AddModule(ctx, r.Repo, cfg, fixture(t, "good_b"), AddOptions{Name: "fleet", Revision: 1}); err == nil {
		t.Fatal("revision 1 twice accepted")
	}
	// An expired root is not signed over.
	r.clk.Advance(DefaultExpiries().Root + time.Hour)
	if err := r.Publish(Expiries{}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("publish under an expired root: %v", err)
	}
	// Revoking below a threshold is refused.
	r2 := newRepo(t, InitOptions{})
	if err := r2.Revoke(r2.root.Signed.Roles[RoleTimestamp].KeyIDs[0], Expiries{}); err == nil {
		t.Fatal("revoking the only timestamp key accepted")
	}
}
