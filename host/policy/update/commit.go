package update

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Commit records u (from Check, now in service) as the last-good module,
// when it differs from the recorded one in module, targets or root.
func (c *Client) Commit(u *Update) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return fmt.Errorf("policy update client closed")
	}
	lg := c.lastGood
	if lg != nil && lg.SHA256 == u.SHA256 && lg.TargetsVersion == u.TargetsVersion && lg.RootVersion == u.RootVersion {
		return nil
	}
	seq := time.Now().UnixNano()
	dir := fmt.Sprintf("lastgood-%d", seq)
	tmp := c.state(dir + ".tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"targets.json": u.targets, "root.json": u.root, "module.wasm": u.Wasm} {
		if err := writeFileAtomic(filepath.Join(tmp, name), data, 0o600); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, c.state(dir)); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	rec, _ := json.Marshal(lastGoodRecord{Name: u.Name, Revision: u.Revision, SHA256: u.SHA256, Dir: dir, AcceptedAt: c.now()})
	if err := writeFileAtomic(c.state(lastGoodFile), rec, 0o600); err != nil {
		return err
	}
	syncDir(c.o.StateDir)
	if lg != nil {
		if old := filepath.Base(filepath.Dir(lg.Source)); strings.HasPrefix(old, "lastgood-") && old != dir {
			os.RemoveAll(c.state(old))
		}
	}
	cp := *u
	cp.Source = c.state(dir, "module.wasm")
	c.lastGood = &cp
	c.stats.Accepted++
	return nil
}

// Forget drops the last-good record (its key was revoked and nothing
// replaces it).
func (c *Client) Forget() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastGood == nil {
		return nil
	}
	old := filepath.Base(filepath.Dir(c.lastGood.Source))
	c.lastGood = nil
	if err := os.Remove(c.state(lastGoodFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if strings.HasPrefix(old, "lastgood-") {
		os.RemoveAll(c.state(old))
	}
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
