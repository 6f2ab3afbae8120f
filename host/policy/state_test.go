package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// restart closes r (if any) and starts a new runtime on the same state
// directory, as a process restart would.
func restart(t *testing.T, r *Runtime, cfg Config) *Runtime {
	t.Helper()
	if r != nil {
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return newRuntime(t, cfg)
}

func TestRollbackIndexSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	s := newSigner(t)
	dir, state := t.TempDir(), t.TempDir()
	cfg := testConfig().WithInsecure(false).WithTrustedKey(s.pub).WithStateDir(state)
	b3 := filepath.Join(dir, "r3.tar.gz")
	b7 := filepath.Join(dir, "r7.tar.gz")
	s.bundle(t, "good_a", 3, b3)
	s.bundle(t, "good_a", 7, b7)

	r := restart(t, nil, cfg)
	if err := r.LoadFile(ctx, b7); err != nil {
		t.Fatal(err)
	}
	r = restart(t, r, cfg)
	err := r.LoadFile(ctx, b3)
	if !errors.Is(err, ErrOldRevision) || !strings.Contains(err.Error(), "revision 3 is not newer than revision 7") || !strings.Contains(err.Error(), RollbackFile) {
		t.Fatalf("old bundle after restart: %v", err)
	}
	if r.Revision() != 0 {
		t.Fatalf("revision %d in service after a refused load", r.Revision())
	}
	// The same revision again is refused too; a newer one loads and is recorded.
	if err := r.LoadFile(ctx, b7); !errors.Is(err, ErrOldRevision) {
		t.Fatalf("same revision after restart: %v", err)
	}
	b8 := filepath.Join(dir, "r8")
	s.bundle(t, "good_b", 8, b8)
	if err := r.LoadFile(ctx, b8); err != nil {
		t.Fatal(err)
	}
	r = restart(t, r, cfg)
	if got := r.RollbackIndex().Revisions(); got["good_b"] != 8 || got["good_a"] != 7 {
		t.Fatalf("index after restart: %v", got)
	}
	// Another policy name has its own index.
	o1 := filepath.Join(dir, "other1")
	wasm, _ := os.ReadFile(fixture(t, "good_a"))
	b, err := SignBundle(wasm, Manifest{Name: "other", Revision: 1, ABIVersion: "1.0", MinEngineVersion: "0.0.0"}, s.priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Write(o1); err != nil {
		t.Fatal(err)
	}
	if err := r.LoadFile(ctx, o1); err != nil {
		t.Fatalf("first revision of another policy: %v", err)
	}
	// No temporary files are left behind (the lock file stays: it is
	// what two processes lock).
	ents, _ := os.ReadDir(state)
	if len(ents) != 2 || ents[0].Name() != RollbackFile || ents[1].Name() != RollbackFile+".lock" {
		t.Fatalf("state dir holds %v", ents)
	}
}

func TestRollbackIndexCorrupt(t *testing.T) {
	ctx := context.Background()
	s := newSigner(t)
	dir, state := t.TempDir(), t.TempDir()
	cfg := testConfig().WithInsecure(false).WithTrustedKey(s.pub).WithStateDir(state)
	b := filepath.Join(dir, "b.tar.gz")
	s.bundle(t, "good_a", 5, b)
	idx := filepath.Join(state, RollbackFile)
	for _, tc := range []struct{ name, content string }{
		{"truncated", `{"format":1,"revisions":{"good_a":`},
		{"garbage", "\x00\x01garbage"},
		{"empty", ""},
		{"negative", `{"format":1,"revisions":{"good_a":-4}}`},
		{"unknown field", `{"format":1,"revisions":{},"x":1}`},
		{"other format", `{"format":2,"revisions":{}}`},
		{"no revisions", `{"format":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(idx, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			r := restart(t, nil, cfg)
			err := r.LoadFile(ctx, b)
			if !errors.Is(err, ErrRollbackState) || !strings.Contains(err.Error(), idx) {
				t.Fatalf("load with a corrupt index: %v", err)
			}
			// Never reset silently: the file is untouched.
			if got, _ := os.ReadFile(idx); string(got) != tc.content {
				t.Fatalf("index rewritten to %q", got)
			}
			r.Close(ctx)
		})
	}
	// Fixed by hand: loads again without a restart.
	r := restart(t, nil, cfg)
	if err := r.LoadFile(ctx, b); !errors.Is(err, ErrRollbackState) {
		t.Fatalf("still corrupt: %v", err)
	}
	if err := os.WriteFile(idx, []byte(`{"format":1,"revisions":{"good_a":4}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.LoadFile(ctx, b); err != nil {
		t.Fatalf("after fixing the file: %v", err)
	}
	// Reset explicitly: the file is moved aside, the next start is a first boot.
	os.WriteFile(idx, []byte("junk"), 0o600)
	aside, err := ResetRollbackIndex(state)
	if err != nil || !strings.Contains(aside, RollbackFile+".reset-") {
		t.Fatalf("reset: %q, %v", aside, err)
	}
	if got, _ := os.ReadFile(aside); string(got) != "junk" {
		t.Fatalf("moved-aside file holds %q", got)
	}
	r = restart(t, r, cfg)
	if err := r.LoadFile(ctx, b); err != nil {
		t.Fatalf("after reset: %v", err)
	}
}

func TestRollbackIndexWriteFailureRefuses(t *testing.T) {
	ctx := context.Background()
	s := newSigner(t)
	dir, state := t.TempDir(), t.TempDir()
	r := newRuntime(t, testConfig().WithInsecure(false).WithTrustedKey(s.pub).WithStateDir(state))
	b := filepath.Join(dir, "b.tar.gz")
	s.bundle(t, "good_a", 5, b)
	// A directory where the index file should be: the rename fails.
	if err := os.Mkdir(filepath.Join(state, RollbackFile), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(state, RollbackFile, "x"), nil, 0o600)
	err := r.LoadFile(ctx, b)
	if !errors.Is(err, ErrRollbackState) || !strings.Contains(err.Error(), "cannot record revision 5") || r.Revision() != 0 {
		t.Fatalf("load with an unwritable index: %v (revision %d)", err, r.Revision())
	}
}

// TestRollbackIndexTwoProcesses: two indexes on one directory (as two
// processes have) never move it backwards (issue #27: 5 -> 3, then 4
// accepted); different names are merged.
func TestRollbackIndexTwoProcesses(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenRollbackIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenRollbackIndex(dir) // opened before a records anything
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Record("a", "fleet", 5); err != nil {
		t.Fatal(err)
	}
	if err := b.Record("b", "fleet", 3); !errors.Is(err, ErrOldRevision) {
		t.Fatalf("revision 3 after another process recorded 5: %v", err)
	}
	if err := b.Record("b", "other", 1); err != nil {
		t.Fatal(err)
	}
	revs, err := readRollbackFile(filepath.Join(dir, RollbackFile))
	if err != nil || revs["fleet"] != 5 || revs["other"] != 1 {
		t.Fatalf("on disk: %v %v, want fleet 5 and other 1", revs, err)
	}
	if err := b.Check("b", "fleet", 4); err == nil {
		if err := b.Record("b", "fleet", 4); !errors.Is(err, ErrOldRevision) {
			t.Fatalf("revision 4 after 5: %v", err)
		}
	}
}

// TestRollbackIndexDanglingSymlink: a dangling symlink in place of the
// index is an unusable index, not a first boot.
func TestRollbackIndexDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, RollbackFile))
	x, err := OpenRollbackIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Check("b", "fleet", 1); !errors.Is(err, ErrRollbackState) {
		t.Fatalf("dangling symlink: want ErrRollbackState, got %v", err)
	}
}
