package update

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/buildinfo"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// Limits bound what one update check may read. Every download stops at
// its limit (+1 byte to detect the excess); files are read one at a time
// and only the module and the current metadata are kept, so the memory an
// update check holds at once is at most
//
//	Module + Root + Timestamp + Snapshot + Targets  (+ go-tuf's parsed copies)
//
// which with DefaultLimits is 16 MiB + 1.3 MiB; the bytes it reads from
// the transport are at most that plus Root for each root rotation
// (MaxRootRotations).
type Limits struct {
	Root, Timestamp, Snapshot, Targets int64 // metadata files, bytes
	Module                             int64 // the policy module, bytes
	MaxRootRotations                   int64 // root versions one check may walk
}

// DefaultLimits: 64 KiB root, 16 KiB timestamp, 256 KiB snapshot, 1 MiB
// targets, a 16 MiB module (policy.DefaultMaxBundleBytes), 32 rotations.
func DefaultLimits() Limits {
	return Limits{Root: 64 << 10, Timestamp: 16 << 10, Snapshot: 256 << 10, Targets: 1 << 20,
		Module: policy.DefaultMaxBundleBytes, MaxRootRotations: 32}
}

// Bound is the most bytes one update check reads from the transport.
func (l Limits) Bound() int64 {
	return l.Root*(l.MaxRootRotations+1) + l.Timestamp + l.Snapshot + l.Targets + l.Module
}

// Options configure a device's update client.
type Options struct {
	// Repo is the repository: an http:// or https:// URL (any static
	// host or CDN serving REPO/published) or a local directory holding a
	// copy of it (delivered offline).
	Repo string
	// TrustedRoot is the root.json the app ships: the device's trust
	// anchor until the repository rotates it.
	TrustedRoot []byte
	// StateDir holds the device's trusted metadata and the last-good
	// module. One process at a time may use it (a lock; a second gets
	// ErrStateLocked).
	StateDir string
	// Name is the policy this device runs: the only target it fetches and
	// accepts (name pinning).
	Name string
	// Limits bound a check; zero: DefaultLimits.
	Limits Limits
	// Timeout bounds one update check (a slow repository is abandoned);
	// 0: 60 s.
	Timeout time.Duration
	// HTTPClient is used for http(s) repositories; nil: a client without
	// a global timeout (Timeout bounds the check).
	HTTPClient *http.Client
	// Now is the clock; nil: time.Now. (Tests move it to expire metadata.)
	Now func() time.Time
	// EngineVersion is checked against a target's min_engine_version; "":
	// this build.
	EngineVersion string
}

// ErrStateLocked: another process owns the state directory.
var ErrStateLocked = errors.New("policy state directory in use by another process")

// ErrStateDamaged: the state directory is inconsistent (a file deleted or
// replaced by something other than a regular file); the client refuses to
// guess. `edgellm policy state --policy-name NAME --reset` starts over.
var ErrStateDamaged = errors.New("policy state damaged")

// ErrRollback: the repository offers an older revision than the device
// accepted.
var ErrRollback = errors.New("policy rollback refused")

// ErrNotOffered: the repository has no target for the device's name.
var ErrNotOffered = errors.New("policy not offered by the repository")

// ErrRevoked: the last-good module's targets metadata is no longer signed
// by keys the current root trusts, and no replacement is offered.
var ErrRevoked = errors.New("last-good policy signed by a key no longer trusted")

// Update is a module the channel verified.
type Update struct {
	Custom
	Wasm           []byte
	Source         string
	TargetsVersion int64
	RootVersion    int64
	// Changed: differs from the last-good module (new module, or the
	// last-good one was revoked).
	Changed bool
	// Lower: the revision is lower than the last-good one, which was
	// revoked (fast-forward recovery).
	Lower bool

	targets []byte // the targets metadata that signs it
	root    []byte
}

// Stats counts what a client did.
type Stats struct {
	Checks, Failed, Accepted int64
	BytesRead                int64 // from the transport, all checks
	LastCheckBytes           int64
}

// Client is a device's update client. Its methods are safe from any
// goroutine (one check at a time).
type Client struct {
	o    Options
	dir  string // repository dir (directory transport) or ""
	lock *os.File

	mu       sync.Mutex
	lastGood *Update
	bootErr  error // why a recorded last-good module is not offered
	stats    Stats
	read     atomic.Int64
}

const (
	metaDir      = "metadata"
	downloadDir  = "download"
	lastGoodFile = "lastgood.json"
	lockFile     = "lock"
)

// Open checks o, takes the lock on the state directory (creating it) and
// reads the last-good record. Close releases the lock.
func Open(o Options) (*Client, error) {
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits()
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if o.EngineVersion == "" {
		o.EngineVersion = buildinfo.Version
	}
	if err := ValidName(o.Name); err != nil {
		return nil, err
	}
	if len(o.TrustedRoot) == 0 {
		return nil, fmt.Errorf("policy repo: no trusted root.json")
	}
	if o.StateDir == "" {
		return nil, fmt.Errorf("policy repo: a state directory is required")
	}
	c := &Client{o: o}
	switch {
	case strings.HasPrefix(o.Repo, "http://") || strings.HasPrefix(o.Repo, "https://"):
		if c.o.HTTPClient == nil {
			c.o.HTTPClient = &http.Client{}
		}
	case o.Repo == "":
		return nil, fmt.Errorf("policy repo: no repository")
	default:
		abs, err := filepath.Abs(o.Repo)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("policy repo: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("policy repo %s: not a directory or an http(s) URL", o.Repo)
		}
		c.dir = abs
	}
	for _, d := range []string{o.StateDir, filepath.Join(o.StateDir, metaDir), filepath.Join(o.StateDir, downloadDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("policy state: %w", err)
		}
	}
	lf, err := os.OpenFile(filepath.Join(o.StateDir, lockFile), os.O_RDWR|os.O_CREATE|lockOpenFlags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("policy state lock: %w", err)
	}
	if err := tryLock(lf); err != nil {
		owner, _ := ReadRegularFile(lf.Name(), 64)
		lf.Close()
		return nil, fmt.Errorf("%w: %s (held by pid %s); give each process its own Options.StateDir", ErrStateLocked, o.StateDir, strings.TrimSpace(string(owner)))
	}
	lf.Truncate(0)
	lf.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	c.lock = lf
	if err := c.readLastGood(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close releases the state directory.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return nil
	}
	err := c.lock.Close() // releases the flock
	c.lock = nil
	return err
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.BytesRead = c.read.Load()
	return s
}

// Name is the pinned policy name.
func (c *Client) Name() string { return c.o.Name }

func (c *Client) now() time.Time {
	if c.o.Now != nil {
		return c.o.Now().UTC()
	}
	return time.Now().UTC()
}

func (c *Client) state(parts ...string) string {
	return filepath.Join(append([]string{c.o.StateDir}, parts...)...)
}

// lastGoodRecord is STATE/lastgood.json; its files are in STATE/DIR.
type lastGoodRecord struct {
	Name       string    `json:"name"`
	Revision   int64     `json:"revision"`
	SHA256     string    `json:"module_sha256"`
	Dir        string    `json:"dir"`
	AcceptedAt time.Time `json:"accepted_at"`
}

// LastGood is the module the device accepted last, verified again from
// the state directory against the current trusted root (no network): nil
// if there is none. Its metadata's expiry is not checked: an accepted
// module keeps running offline; expiry guards accepting new ones.
func (c *Client) LastGood() (*Update, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastGood, c.bootErr
}

func (c *Client) readLastGood() error {
	data, err := ReadRegularFile(c.state(lastGoodFile), 4<<10)
	if errors.Is(err, os.ErrNotExist) {
		// No last-good record but trusted metadata: the device keeps
		// TUF's version floor; nothing to boot.
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStateDamaged, err)
	}
	var rec lastGoodRecord
	if err := json.Unmarshal(data, &rec); err != nil || rec.Name == "" || strings.ContainsAny(rec.Dir, "/\\") || !strings.HasPrefix(rec.Dir, "lastgood-") {
		return fmt.Errorf("%w: %s unreadable", ErrStateDamaged, c.state(lastGoodFile))
	}
	if rec.Name != c.o.Name {
		return fmt.Errorf("%w: state %s holds policy %q, this device runs %q (one state directory per policy name)", ErrStateDamaged, c.o.StateDir, rec.Name, c.o.Name)
	}
	// A last-good module without the trusted metadata that accepted it
	// means someone deleted the rollback state: refuse rather than start
	// over with no floor.
	if _, err := os.Lstat(c.state(metaDir, "timestamp.json")); err != nil {
		return fmt.Errorf("%w: %s is missing but a last-good module is recorded (deleted rollback state?): remove the state directory to start over from the shipped root", ErrStateDamaged, c.state(metaDir, "timestamp.json"))
	}
	lim := c.o.Limits
	read := func(name string, max int64) ([]byte, error) {
		b, err := ReadRegularFile(c.state(rec.Dir, name), max)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStateDamaged, err)
		}
		return b, nil
	}
	targets, err := read("targets.json", lim.Targets)
	if err != nil {
		return err
	}
	wasm, err := read("module.wasm", lim.Module)
	if err != nil {
		return err
	}
	root, err := c.trustedRoot()
	if err != nil {
		return err
	}
	u, err := c.verifyTarget(root, targets, wasm)
	if errors.Is(err, ErrRevoked) {
		// Its key was revoked since: do not run it; the next check
		// fetches what the repository signs now.
		c.bootErr = fmt.Errorf("last-good policy in %s not run: %w", c.o.StateDir, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("last-good policy in %s: %w", c.o.StateDir, err)
	}
	if u.Revision != rec.Revision || u.SHA256 != rec.SHA256 {
		return fmt.Errorf("%w: %s does not match its files", ErrStateDamaged, c.state(lastGoodFile))
	}
	u.Source = c.state(rec.Dir, "module.wasm")
	c.lastGood = u
	return nil
}

// trustedRoot is the newest trusted root: the state's, or the shipped one
// if the state has none or an older one (an app update shipped a newer
// root).
func (c *Client) trustedRoot() (*metadata.Metadata[metadata.RootType], error) {
	shipped, err := metadata.Root().FromBytes(c.o.TrustedRoot)
	if err != nil {
		return nil, fmt.Errorf("trusted root.json: %w", err)
	}
	data, err := ReadRegularFile(c.state(metaDir, "root.json"), c.o.Limits.Root)
	if errors.Is(err, os.ErrNotExist) {
		return shipped, verifySelf(shipped)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStateDamaged, err)
	}
	stored, err := metadata.Root().FromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrStateDamaged, c.state(metaDir, "root.json"), err)
	}
	if shipped.Signed.Version > stored.Signed.Version {
		return shipped, verifySelf(shipped)
	}
	return stored, verifySelf(stored)
}

func verifySelf(root *metadata.Metadata[metadata.RootType]) error {
	if err := root.VerifyDelegate(RoleRoot, root); err != nil {
		return fmt.Errorf("root.json version %d: %w", root.Signed.Version, err)
	}
	return nil
}

// verifyTarget checks that targets is signed by root's targets role and
// that wasm is the device's pinned target in it, compatible with this
// host.
func (c *Client) verifyTarget(root *metadata.Metadata[metadata.RootType], targetsData, wasm []byte) (*Update, error) {
	tg, err := metadata.Targets().FromBytes(targetsData)
	if err != nil {
		return nil, err
	}
	if err := root.VerifyDelegate(RoleTargets, tg); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRevoked, err)
	}
	tf := tg.Signed.Targets[TargetPath(c.o.Name)]
	if tf == nil {
		return nil, fmt.Errorf("%w: no %s in targets version %d", ErrNotOffered, TargetPath(c.o.Name), tg.Signed.Version)
	}
	tf.Path = TargetPath(c.o.Name)
	u, err := c.checkTarget(tf)
	if err != nil {
		return nil, err
	}
	if err := tf.VerifyLengthHashes(wasm); err != nil {
		return nil, err
	}
	rootData, _ := root.ToBytes(false)
	u.Wasm, u.TargetsVersion, u.RootVersion, u.targets, u.root = wasm, tg.Signed.Version, root.Signed.Version, targetsData, rootData
	return u, nil
}
