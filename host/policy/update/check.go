package update

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/edgellm/edgellm/host/policy"
	"github.com/theupdateframework/go-tuf/v2/metadata"
	"github.com/theupdateframework/go-tuf/v2/metadata/config"
	"github.com/theupdateframework/go-tuf/v2/metadata/updater"
)

// checkTarget checks a target's custom metadata against the pinned name,
// the limits and this host.
func (c *Client) checkTarget(tf *metadata.TargetFiles) (*Update, error) {
	cu, err := CustomOf(tf)
	if err != nil {
		return nil, err
	}
	if cu.Name != c.o.Name {
		return nil, fmt.Errorf("target %s names policy %q, this device runs %q", tf.Path, cu.Name, c.o.Name)
	}
	if cu.Revision <= 0 {
		return nil, fmt.Errorf("target %s: revision %d", tf.Path, cu.Revision)
	}
	if tf.Length > c.o.Limits.Module {
		return nil, fmt.Errorf("target %s: %d bytes, limit %d", tf.Path, tf.Length, c.o.Limits.Module)
	}
	if h := hex.EncodeToString(tf.Hashes["sha256"]); h != cu.SHA256 {
		return nil, fmt.Errorf("target %s: custom module_sha256 %s differs from its TUF sha256 %s", tf.Path, cu.SHA256, h)
	}
	if err := policy.CheckCompat(tf.Path, cu.ABI, cu.MinEngineVersion, c.o.EngineVersion); err != nil {
		return nil, err
	}
	return &Update{Custom: *cu}, nil
}

// checkState refuses a state directory whose metadata files are not
// regular files (go-tuf reads them with os.ReadFile: a FIFO would block
// it).
func (c *Client) checkState() error {
	ents, err := os.ReadDir(c.state(metaDir))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStateDamaged, err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file", ErrStateDamaged, c.state(metaDir, e.Name()))
		}
	}
	return nil
}

// Check runs one TUF update check against the repository and returns the
// device's policy as the repository now signs it. It does not record it:
// call Commit once the module is in service. A check that fails leaves
// the last-good module and the trusted metadata as they were (go-tuf
// persists only metadata it verified).
func (c *Client) Check(ctx context.Context) (*Update, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return nil, fmt.Errorf("policy update client closed")
	}
	c.stats.Checks++
	before := c.read.Load()
	u, err := c.check(ctx)
	c.stats.LastCheckBytes = c.read.Load() - before
	if err != nil {
		c.stats.Failed++
	}
	return u, err
}

func (c *Client) check(ctx context.Context) (*Update, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	if err := c.checkState(); err != nil {
		return nil, err
	}
	root, err := c.trustedRoot()
	if err != nil {
		return nil, err
	}
	rootData, err := root.ToBytes(false)
	if err != nil {
		return nil, err
	}
	remote := c.o.Repo
	if c.dir != "" {
		remote = c.dir
	}
	cfg, err := config.New(remote, rootData)
	if err != nil {
		return nil, err
	}
	lim := c.o.Limits
	cfg.RootMaxLength, cfg.TimestampMaxLength, cfg.SnapshotMaxLength, cfg.TargetsMaxLength = lim.Root, lim.Timestamp, lim.Snapshot, lim.Targets
	cfg.MaxRootRotations = lim.MaxRootRotations
	cfg.MaxDelegations = 0
	cfg.LocalMetadataDir = c.state(metaDir)
	cfg.LocalTargetsDir = c.state(downloadDir)
	cfg.Fetcher = &fetcher{ctx: ctx, dir: c.dir, http: c.o.HTTPClient, read: &c.read}
	up, err := updater.New(cfg)
	if err != nil {
		return nil, err
	}
	up.UnsafeSetRefTime(c.now())
	if err := up.Refresh(); err != nil {
		return nil, fmt.Errorf("update check %s: %w", c.o.Repo, err)
	}
	trusted := up.GetTrustedMetadataSet()
	lg := c.lastGood
	revoked := false
	if lg != nil {
		tg, err := metadata.Targets().FromBytes(lg.targets)
		revoked = err != nil || trusted.Root.VerifyDelegate(RoleTargets, tg) != nil
	}
	tf := trusted.Targets[RoleTargets].Signed.Targets[TargetPath(c.o.Name)]
	if tf == nil {
		if revoked {
			return nil, fmt.Errorf("%w (revision %d) and the repository offers no %s", ErrRevoked, lg.Revision, TargetPath(c.o.Name))
		}
		return nil, fmt.Errorf("%w: %s has no %s (this device is pinned to %q)", ErrNotOffered, c.o.Repo, TargetPath(c.o.Name), c.o.Name)
	}
	tf.Path = TargetPath(c.o.Name)
	u, err := c.checkTarget(tf)
	if err != nil {
		return nil, err
	}
	if lg != nil && !revoked {
		if u.Revision < lg.Revision {
			return nil, fmt.Errorf("%w: %s offers %s revision %d, this device accepted revision %d", ErrRollback, c.o.Repo, c.o.Name, u.Revision, lg.Revision)
		}
		if u.Revision == lg.Revision && u.SHA256 != lg.SHA256 {
			return nil, fmt.Errorf("%w: %s revision %d with a different module (%s, accepted %s)", ErrRollback, c.o.Name, u.Revision, u.SHA256[:16], lg.SHA256[:16])
		}
	}
	var wasm []byte
	if lg != nil && lg.SHA256 == u.SHA256 {
		wasm = lg.Wasm
	} else {
		tmp := c.state(downloadDir, "module.wasm")
		os.Remove(tmp) // whatever is there (go-tuf writes it with os.WriteFile)
		if _, wasm, err = up.DownloadTarget(tf, tmp, ""); err != nil {
			return nil, fmt.Errorf("update check %s: %w", c.o.Repo, err)
		}
		os.Remove(tmp)
	}
	targetsData, err := trusted.Targets[RoleTargets].ToBytes(false)
	if err != nil {
		return nil, err
	}
	nu, err := c.verifyTarget(trusted.Root, targetsData, wasm)
	if err != nil {
		return nil, err
	}
	nu.Source = c.o.Repo + "#" + TargetPath(c.o.Name)
	nu.Changed = lg == nil || revoked || lg.SHA256 != nu.SHA256
	nu.Lower = lg != nil && nu.Revision < lg.Revision
	return nu, nil
}
