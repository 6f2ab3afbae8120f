package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// RollbackFile is the rollback index's file name inside the state directory.
const RollbackFile = "rollback.json"

// rollbackFormat is the version of RollbackFile's layout.
const rollbackFormat = 1

// RollbackIndex is the persisted rollback index: the highest bundle
// revision ever accepted for each policy name, kept in DIR/rollback.json so
// that an old, correctly signed bundle is refused after a restart too (as
// Android Verified Boot's rollback index). Every update is written to a
// temporary file, fsynced, renamed over the old file and the directory
// fsynced, so a crash leaves either the old or the new index, never a mix.
//
// A missing file is a first boot (empty index). A file that does not parse
// is never reset silently: every Check fails with ErrRollbackState naming
// the file, re-reading it each time, until it is fixed or ResetRollbackIndex
// moves it aside. One process at a time may use a state directory.
type RollbackIndex struct {
	mu   sync.Mutex
	path string // "" = memory only
	revs map[string]int64
	err  error // the file is unusable
}

type rollbackDoc struct {
	Format    int              `json:"format"`
	Revisions map[string]int64 `json:"revisions"` // policy name -> highest accepted revision
}

// OpenRollbackIndex opens the index in dir ("" = memory only). It creates
// dir if needed. A corrupt file is not an error here: the index reports it
// from Check and Err, so that the runtime starts and keeps its built-in
// default while no bundle can be accepted.
func OpenRollbackIndex(dir string) (*RollbackIndex, error) {
	x := &RollbackIndex{revs: map[string]int64{}}
	if dir == "" {
		return x, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("policy state %s: %w", dir, err)
	}
	x.path = filepath.Join(dir, RollbackFile)
	x.reload()
	return x, nil
}

// Path is the index file ("" for an in-memory index).
func (x *RollbackIndex) Path() string { return x.path }

// Err is why the index file is unusable, nil if it is fine.
func (x *RollbackIndex) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// Revisions returns a copy of the index.
func (x *RollbackIndex) Revisions() map[string]int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make(map[string]int64, len(x.revs))
	for k, v := range x.revs {
		out[k] = v
	}
	return out
}

// reload reads the file; x.mu must be held or x not yet shared.
func (x *RollbackIndex) reload() {
	revs, err := readRollbackFile(x.path)
	if err != nil {
		x.err = loadErrorf(x.path, ErrRollbackState, "rollback index %s is unreadable, refusing every bundle until it is fixed or reset (edgellm policy state --reset): %v", x.path, err)
		return
	}
	x.revs, x.err = revs, nil
}

func readRollbackFile(path string) (map[string]int64, error) {
	// A symlink (even a dangling one) or a FIFO in its place is not a
	// first boot.
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]int64{}, nil // first boot
	}
	if err != nil {
		return nil, err
	}
	var doc rollbackDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	if doc.Format != rollbackFormat {
		return nil, fmt.Errorf("format %d, want %d", doc.Format, rollbackFormat)
	}
	if doc.Revisions == nil {
		return nil, errors.New("no \"revisions\" object")
	}
	for name, rev := range doc.Revisions {
		if name == "" || rev <= 0 {
			return nil, fmt.Errorf("entry %q: %d is not a valid name and positive revision", name, rev)
		}
	}
	return doc.Revisions, nil
}

// Check fails unless rev is newer than every accepted revision of name
// (ErrOldRevision, naming both), or if the index file is unusable
// (ErrRollbackState, naming the file).
func (x *RollbackIndex) Check(path, name string, rev int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		x.reload() // fixed by hand meanwhile?
		if x.err != nil {
			return x.err
		}
	}
	if old := x.revs[name]; rev <= old {
		where := "in this process"
		if x.path != "" {
			where = "recorded in " + x.path
		}
		return loadErrorf(path, ErrOldRevision, "policy %q revision %d is not newer than revision %d, the newest accepted (%s)", name, rev, old, where)
	}
	return nil
}

// Record makes rev the newest accepted revision of name, on disk first: if
// the write fails the index is unchanged and the error says why (the caller
// then refuses the bundle).
func (x *RollbackIndex) Record(path, name string, rev int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		return x.err
	}
	if rev <= x.revs[name] {
		return loadErrorf(path, ErrOldRevision, "policy %q revision %d is not newer than revision %d, the newest accepted", name, rev, x.revs[name])
	}
	next := make(map[string]int64, len(x.revs)+1)
	for k, v := range x.revs {
		next[k] = v
	}
	if x.path != "" {
		// Another process may share the directory: under an exclusive
		// lock, merge what is on disk (the highest revision of each name
		// wins), so the index never moves backwards.
		unlock, err := lockFile(x.path + ".lock")
		if err != nil {
			return loadErrorf(path, ErrRollbackState, "cannot lock %s: %v", x.path, err)
		}
		defer unlock()
		disk, err := readRollbackFile(x.path)
		if err != nil {
			return loadErrorf(path, ErrRollbackState, "cannot record revision %d in %s: %v", rev, x.path, err)
		}
		for k, v := range disk {
			if v > next[k] {
				next[k] = v
			}
		}
		if rev <= next[name] {
			x.revs = next
			return loadErrorf(path, ErrOldRevision, "policy %q revision %d is not newer than revision %d, the newest accepted (recorded in %s, by another process)", name, rev, next[name], x.path)
		}
		next[name] = rev
		if err := writeRollbackFile(x.path, next); err != nil {
			return loadErrorf(path, ErrRollbackState, "cannot record revision %d in %s: %v", rev, x.path, err)
		}
	}
	next[name] = rev
	x.revs = next
	return nil
}

func writeRollbackFile(path string, revs map[string]int64) error {
	data, err := json.MarshalIndent(rollbackDoc{Format: rollbackFormat, Revisions: revs}, "", "  ")
	if err != nil {
		return err
	}
	return writeFileSync(path, append(data, '\n'), 0o600)
}

// writeFileSync writes data to a temporary file beside path, fsyncs it,
// renames it over path and fsyncs the directory.
func writeFileSync(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Chmod(perm)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return werr
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ResetRollbackIndex moves dir's index file aside (to rollback.json.reset-
// UNIXTIME, kept for inspection) so the next start is a first boot. It is
// the explicit reset a corrupt index requires; it returns the new name, or
// "" if there was no file.
func ResetRollbackIndex(dir string) (string, error) {
	p := filepath.Join(dir, RollbackFile)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	aside := p + ".reset-" + strconv.FormatInt(time.Now().Unix(), 10)
	if err := os.Rename(p, aside); err != nil {
		return "", err
	}
	return aside, nil
}
