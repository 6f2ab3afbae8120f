package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch loads path now and again whenever it changes, until ctx is done or
// the runtime is closed. path is a .wasm, a bundle .tar.gz or a bundle
// directory. Watch returns once the watch is set up (the initial load's
// error is returned but the watch stays on, so a fixed file is picked up);
// reloads run on a background goroutine, and each one is compiled and
// instantiated there and swapped in atomically between two Decide calls.
// A burst of events is coalesced (Config.WithReloadDebounce). Failed reloads
// are logged and counted (Stats.LoadErrors); the current policy stays.
func (r *Runtime) Watch(ctx context.Context, path string) error {
	if r.closed.Load() {
		return ErrClosed
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("policy watch: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("policy watch: %w", err)
	}
	// Watch the parent of a file (writers rename over it) or the bundle
	// directory itself.
	dir, base := filepath.Dir(path), filepath.Base(path)
	if fi.IsDir() {
		dir, base = path, ""
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return fmt.Errorf("policy watch %s: %w", dir, err)
	}
	loadErr := r.LoadFile(ctx, path)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer w.Close()
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.stop:
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if base != "" && filepath.Base(ev.Name) != base {
					continue
				}
				if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) == 0 {
					continue
				}
				timer.Reset(r.cfg.debounce)
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				r.log.Warn("policy: watch error", "path", path, "err", err)
			case <-timer.C:
				if err := r.LoadFile(ctx, path); err != nil { // counted by LoadFile
					r.log.Warn("policy: reload refused, current policy kept", "path", path, "err", err)
				}
			}
		}
	}()
	return loadErr
}
