package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// An inbox is a directory an app drops downloaded bundles into. The
// contract (docs/POLICY-UPDATES.md): write the bundle (a .tar.gz, or a
// bundle directory) somewhere else on the same file system, then rename it
// into the inbox, so that a bundle appears in the inbox complete or not at
// all. Names starting with "." or ending in ".tmp" or ".part" are in
// progress and ignored.
//
// On every change the inbox reads and verifies the entries it has not seen
// (or that changed since), exactly as LoadFile would, and loads the one with
// the highest revision; the runtime swaps it in between two Decide calls.
// Partial, corrupt, unverifiable, expired or older bundles are logged once
// and never loaded; the policy in service keeps running. The inbox never
// deletes or modifies anything in the directory: the app may remove any
// entry at any time (a loaded bundle is not needed afterwards).

// InboxStats counts what an inbox did with the entries it has seen.
type InboxStats struct {
	Scans      uint64 `json:"scans"`
	Loaded     uint64 `json:"loaded"`     // bundles put in service
	Refused    uint64 `json:"refused"`    // partial, corrupt, unverifiable, expired, older, or failed to load
	Superseded uint64 `json:"superseded"` // good bundles skipped because a newer one arrived in the same scan
	Ignored    uint64 `json:"ignored"`    // in-progress names and symlinks
}

// Inbox watches a directory and loads complete new bundles into a Runtime.
// Make one with Runtime.WatchInbox; it stops with Close, its context, or the
// runtime's Close.
type Inbox struct {
	r    *Runtime
	dir  string
	stop chan struct{}
	once sync.Once
	done chan struct{}

	mu   sync.Mutex // serializes scans
	seen map[string]inboxEntry

	scans, loaded, refused, superseded, ignored atomic.Uint64
}

// inboxEntry is what a scan remembers of a name, so that it is not read
// again until it changes.
type inboxEntry struct {
	size  int64
	mtime time.Time
}

// WatchInbox starts watching dir (which must exist) and scans it once
// before returning; that first scan's loads have happened when it returns.
// Later scans run on a background goroutine, at most Config.
// WithReloadDebounce after the first change of a burst.
func (r *Runtime) WatchInbox(ctx context.Context, dir string) (*Inbox, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("policy inbox: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("policy inbox %s: not a directory", dir)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("policy inbox: %w", err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("policy inbox %s: %w", dir, err)
	}
	in := &Inbox{r: r, dir: dir, stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]inboxEntry{}}
	in.Scan(ctx)
	r.wg.Add(1)
	go in.loop(ctx, w)
	return in, nil
}

// Dir is the watched directory.
func (in *Inbox) Dir() string { return in.dir }

// Close stops watching and waits for a scan in progress.
func (in *Inbox) Close() error {
	in.once.Do(func() { close(in.stop) })
	<-in.done
	return nil
}

// Stats returns the inbox's counters. Safe from any goroutine.
func (in *Inbox) Stats() InboxStats {
	return InboxStats{Scans: in.scans.Load(), Loaded: in.loaded.Load(), Refused: in.refused.Load(),
		Superseded: in.superseded.Load(), Ignored: in.ignored.Load()}
}

func (in *Inbox) loop(ctx context.Context, w *fsnotify.Watcher) {
	defer in.r.wg.Done()
	defer close(in.done)
	defer w.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-in.stop:
			return
		case <-in.r.stop:
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			// A rename into the directory is a Create; a Write matters for
			// writers who break the contract (the scan then sees a partial
			// file, refuses it, and reads it again once it changes).
			if ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Rename) == 0 || pending {
				continue
			}
			pending = true
			timer.Reset(in.r.cfg.debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow loses events: scan to catch up.
			in.r.log.Warn("policy: inbox watch error, rescanning", "dir", in.dir, "err", err)
			if !pending {
				pending = true
				timer.Reset(in.r.cfg.debounce)
			}
		case <-timer.C:
			pending = false
			in.Scan(ctx)
		}
	}
}

// inboxCandidate is a verified bundle found by a scan.
type inboxCandidate struct {
	path string
	b    *Bundle
}

// Scan reads the entries that are new or changed since the last scan,
// loads the verified bundle with the highest revision and logs every entry
// it refuses. The watch calls it; call it directly to poll.
func (in *Inbox) Scan(ctx context.Context) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.scans.Add(1)
	r := in.r
	ents, err := os.ReadDir(in.dir)
	if err != nil {
		r.log.Warn("policy: inbox unreadable", "dir", in.dir, "err", err)
		return
	}
	present := make(map[string]bool, len(ents))
	var cands []inboxCandidate
	for _, e := range ents {
		name := e.Name()
		present[name] = true
		if inProgressName(name) {
			continue
		}
		info, err := os.Lstat(filepath.Join(in.dir, name))
		if err != nil {
			continue // removed meanwhile
		}
		mtime := info.ModTime()
		if info.IsDir() {
			mtime = latestMtime(filepath.Join(in.dir, name), mtime)
		}
		ent := inboxEntry{size: info.Size(), mtime: mtime}
		if old, ok := in.seen[name]; ok && old == ent {
			continue
		}
		in.seen[name] = ent
		path := filepath.Join(in.dir, name)
		if info.Mode()&os.ModeSymlink != 0 {
			in.ignored.Add(1)
			r.log.Warn("policy: inbox entry is a symlink, ignored (rename bundles in)", "path", path)
			continue
		}
		if !info.IsDir() && !info.Mode().IsRegular() {
			// A FIFO, device or socket: opening it could block the scan
			// (a FIFO with no writer) or read without end.
			in.ignored.Add(1)
			r.log.Warn("policy: inbox entry is not a regular file or directory, ignored", "path", path, "type", info.Mode().Type().String())
			continue
		}
		b, err := in.read(path)
		if err != nil {
			in.refuse(path, err)
			continue
		}
		// Keep only what ranks it: a scan holds one module at a time,
		// however many bundles arrived (the chosen one is read again).
		b.Wasm = nil
		cands = append(cands, inboxCandidate{path, b})
	}
	for name := range in.seen {
		if !present[name] {
			delete(in.seen, name) // removed by the app
		}
	}
	// Newest first: load the first that installs; the good ones below it
	// arrived together with a newer one and are superseded, not loaded.
	sort.Slice(cands, func(i, j int) bool { return cands[i].b.Manifest.Revision > cands[j].b.Manifest.Revision })
	loaded := false
	for _, c := range cands {
		if loaded {
			in.superseded.Add(1)
			r.log.Info("policy: inbox bundle superseded by a newer one, not loaded", "path", c.path, "revision", c.b.Manifest.Revision)
			continue
		}
		b, err := in.read(c.path)
		if err != nil {
			in.refuse(c.path, err)
			continue
		}
		if err := r.install(ctx, c.path, b.Wasm, &b.Manifest); err != nil {
			r.c.loadErrors.Add(1)
			in.refuse(c.path, err)
			continue
		}
		loaded = true
		in.loaded.Add(1)
		r.log.Info("policy: inbox bundle loaded", "path", c.path, "name", c.b.Manifest.Name, "revision", c.b.Manifest.Revision)
	}
}

// read reads and verifies one entry, exactly as LoadFile would.
func (in *Inbox) read(path string) (*Bundle, error) {
	b, err := ReadBundle(path, in.r.cfg.bundle)
	if err != nil {
		return nil, err
	}
	if err := in.r.verify(b); err != nil {
		return nil, err
	}
	if err := in.r.checkRevision(path, &b.Manifest); err != nil {
		return nil, err
	}
	return b, nil
}

func (in *Inbox) refuse(path string, err error) {
	in.refused.Add(1)
	var le *LoadError
	kind := "error"
	if errors.As(err, &le) {
		kind = le.Kind.Error()
	}
	in.r.log.Warn("policy: inbox bundle refused, left in place, current policy kept", "path", path, "why", kind, "err", err)
}

// inProgressName reports whether name is, by the contract, still being
// written.
func inProgressName(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".part")
}

// latestMtime is the newest mtime among dir and its direct entries, so
// that a bundle directory whose files are replaced in place counts as
// changed.
func latestMtime(dir string, t time.Time) time.Time {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return t
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.ModTime().After(t) {
			t = info.ModTime()
		}
	}
	return t
}
