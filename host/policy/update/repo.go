package update

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// Repository layout on the operator's disk:
//
//	REPO/keys/KEYID.key        private keys (FileKeyring); never published
//	REPO/staged/targets.json   the next targets metadata, unsigned
//	REPO/published/            what a device fetches: serve it over HTTP(S)
//	                           or copy it to the device (--policy-repo)
//	    N.root.json, root.json   every root version; root.json is the newest
//	                             (the one an app ships)
//	    timestamp.json
//	    N.snapshot.json, N.targets.json  (consistent snapshots)
//	    targets/SHA256.NAME.wasm
const (
	keysDir      = "keys"
	stagedDir    = "staged"
	publishedDir = "published"
)

// Roles, as go-tuf names them.
const (
	RoleRoot      = metadata.ROOT
	RoleTargets   = metadata.TARGETS
	RoleSnapshot  = metadata.SNAPSHOT
	RoleTimestamp = metadata.TIMESTAMP
)

var topRoles = []string{RoleRoot, RoleTargets, RoleSnapshot, RoleTimestamp}

// Custom is the custom metadata of a policy target: what the device checks
// besides TUF's length and hashes.
type Custom struct {
	Name             string `json:"name"`
	Revision         int64  `json:"revision"`
	ABI              string `json:"abi"`           // "MAJOR.MINOR" the module speaks (read from the module at add time)
	ABIMin           string `json:"abi_min"`       // lowest host ABI that runs it: MAJOR.0 (minors are backward compatible)
	ABIMax           string `json:"abi_max"`       // highest: MAJOR.x
	SHA256           string `json:"module_sha256"` // the module's digest (TUF's hashes carry it too)
	MinEngineVersion string `json:"min_engine_version"`
}

type customEnvelope struct {
	Edgellm *Custom `json:"edgellm"`
}

// TargetPath is the TUF target path of policy name.
func TargetPath(name string) string { return name + ".wasm" }

var nameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidName checks a policy name.
func ValidName(name string) error {
	if !nameRe.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("policy name %q: use 1-64 of a-z 0-9 . _ - starting with a letter or digit", name)
	}
	return nil
}

// Expiry bounds, per role. An expiry outside them is refused: a typo such
// as 200000d must not sign something that never (or already) expires.
var expiryRange = map[string][2]time.Duration{
	RoleRoot:      {time.Hour, 10 * 366 * 24 * time.Hour},
	RoleTargets:   {time.Minute, 2 * 366 * 24 * time.Hour},
	RoleSnapshot:  {time.Minute, 366 * 24 * time.Hour},
	RoleTimestamp: {time.Minute, 31 * 24 * time.Hour},
}

// Expiries is how long each role's metadata is valid when signed.
type Expiries struct {
	Root, Targets, Snapshot, Timestamp time.Duration
}

// DefaultExpiries: a root for a year, targets for 90 days, snapshot for a
// week, timestamp for a day (the freeze window: a device that sees no
// fresh timestamp for a day stops accepting updates until it does).
func DefaultExpiries() Expiries {
	return Expiries{Root: 365 * 24 * time.Hour, Targets: 90 * 24 * time.Hour, Snapshot: 7 * 24 * time.Hour, Timestamp: 24 * time.Hour}
}

func (e Expiries) of(role string) time.Duration {
	switch role {
	case RoleRoot:
		return e.Root
	case RoleTargets:
		return e.Targets
	case RoleSnapshot:
		return e.Snapshot
	}
	return e.Timestamp
}

// Check range-checks every expiry.
func (e Expiries) Check() error {
	for _, role := range topRoles {
		d, r := e.of(role), expiryRange[role]
		if d < r[0] || d > r[1] {
			return fmt.Errorf("%s expiry %s: must be between %s and %s", role, fmtDays(d), fmtDays(r[0]), fmtDays(r[1]))
		}
	}
	return nil
}

func fmtDays(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// ParseExpiry parses "90d", "12h", "30m" (days are 24 h). Overflow and
// non-positive values are errors.
func ParseExpiry(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v <= 0 || v > 100*366 {
			return 0, fmt.Errorf("expiry %q: want a positive number of days up to 36600", s)
		}
		return time.Duration(v) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("expiry %q: want e.g. 90d, 12h or 30m", s)
	}
	return d, nil
}

// InitOptions configures a new repository.
type InitOptions struct {
	// Keys and threshold per role; zero values mean 1 and 1.
	RootKeys, RootThreshold       int
	TargetsKeys, TargetsThreshold int
	Expiries                      Expiries // zero: DefaultExpiries
}

// Repo is an operator's repository on disk.
type Repo struct {
	Dir  string
	Keys Keyring
	Now  func() time.Time // nil: time.Now

	root      *metadata.Metadata[metadata.RootType]
	targets   *metadata.Metadata[metadata.TargetsType] // newest published
	snapshot  *metadata.Metadata[metadata.SnapshotType]
	timestamp *metadata.Metadata[metadata.TimestampType]
	staged    *metadata.Metadata[metadata.TargetsType] // nil: nothing staged
}

func (r *Repo) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

// PublishedDir is the directory devices fetch from.
func (r *Repo) PublishedDir() string { return filepath.Join(r.Dir, publishedDir) }

// RootPath is the newest root.json: the file an app ships as its trust
// anchor.
func (r *Repo) RootPath() string { return filepath.Join(r.PublishedDir(), "root.json") }

// InitRepo creates a repository in dir (which must not hold one): keys for
// every role, root version 1, empty targets, and publishes them.
func InitRepo(dir string, keys Keyring, o InitOptions, now func() time.Time) (*Repo, error) {
	if o.Expiries == (Expiries{}) {
		o.Expiries = DefaultExpiries()
	}
	if err := o.Expiries.Check(); err != nil {
		return nil, err
	}
	def := func(v *int) {
		if *v == 0 {
			*v = 1
		}
	}
	def(&o.RootKeys)
	def(&o.RootThreshold)
	def(&o.TargetsKeys)
	def(&o.TargetsThreshold)
	if o.RootThreshold > o.RootKeys || o.TargetsThreshold > o.TargetsKeys || o.RootKeys < 1 || o.TargetsKeys < 1 || o.RootKeys > 16 || o.TargetsKeys > 16 {
		return nil, fmt.Errorf("keys/threshold: root %d/%d, targets %d/%d: need 1 <= threshold <= keys <= 16", o.RootThreshold, o.RootKeys, o.TargetsThreshold, o.TargetsKeys)
	}
	if _, err := os.Stat(filepath.Join(dir, publishedDir, "root.json")); err == nil {
		return nil, fmt.Errorf("%s already holds a repository", dir)
	}
	for _, d := range []string{dir, filepath.Join(dir, stagedDir), filepath.Join(dir, publishedDir, "targets")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	r := &Repo{Dir: dir, Keys: keys, Now: now}
	t := r.now()
	root := metadata.Root(t.Add(o.Expiries.Root))
	root.Signed.ConsistentSnapshot = true
	n := map[string][2]int{RoleRoot: {o.RootKeys, o.RootThreshold}, RoleTargets: {o.TargetsKeys, o.TargetsThreshold}, RoleSnapshot: {1, 1}, RoleTimestamp: {1, 1}}
	for _, role := range topRoles {
		for i := 0; i < n[role][0]; i++ {
			k, err := keys.NewKey()
			if err != nil {
				return nil, err
			}
			if err := root.Signed.AddKey(k, role); err != nil {
				return nil, err
			}
		}
		root.Signed.Roles[role].Threshold = n[role][1]
	}
	if err := r.signRoot(root, nil); err != nil {
		return nil, err
	}
	r.root = root
	r.staged = metadata.Targets(t.Add(o.Expiries.Targets))
	r.staged.Signed.Version = 0 // publish makes it 1
	r.snapshot = metadata.Snapshot()
	r.snapshot.Signed.Version = 0
	r.timestamp = metadata.Timestamp()
	r.timestamp.Signed.Version = 0
	if err := r.writeRoot(); err != nil {
		return nil, err
	}
	if err := r.Publish(o.Expiries); err != nil {
		return nil, err
	}
	return r, nil
}

// OpenRepo reads the repository in dir.
func OpenRepo(dir string, keys Keyring, now func() time.Time) (*Repo, error) {
	r := &Repo{Dir: dir, Keys: keys, Now: now}
	pub := r.PublishedDir()
	var err error
	if r.root, err = metadata.Root().FromFile(filepath.Join(pub, "root.json")); err != nil {
		return nil, fmt.Errorf("%s: not a policy repository (run `edgellm policy repo init`): %w", dir, err)
	}
	if r.timestamp, err = metadata.Timestamp().FromFile(filepath.Join(pub, "timestamp.json")); err != nil {
		return nil, err
	}
	sv := r.timestamp.Signed.Meta["snapshot.json"].Version
	if r.snapshot, err = metadata.Snapshot().FromFile(filepath.Join(pub, fmt.Sprintf("%d.snapshot.json", sv))); err != nil {
		return nil, err
	}
	tv := r.snapshot.Signed.Meta["targets.json"].Version
	if r.targets, err = metadata.Targets().FromFile(filepath.Join(pub, fmt.Sprintf("%d.targets.json", tv))); err != nil {
		return nil, err
	}
	if st, err := metadata.Targets().FromFile(filepath.Join(dir, stagedDir, "targets.json")); err == nil {
		r.staged = st
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return r, nil
}

// Root is the newest root metadata.
func (r *Repo) Root() *metadata.Metadata[metadata.RootType] { return r.root }

// Targets returns the targets that will be published next (staged, or the
// published ones).
func (r *Repo) Targets() map[string]*metadata.TargetFiles {
	if r.staged != nil {
		return r.staged.Signed.Targets
	}
	return r.targets.Signed.Targets
}

// CustomOf decodes a target's edgellm custom metadata.
func CustomOf(tf *metadata.TargetFiles) (*Custom, error) {
	if tf == nil || tf.Custom == nil {
		return nil, fmt.Errorf("target has no custom metadata")
	}
	var env customEnvelope
	if err := json.Unmarshal(*tf.Custom, &env); err != nil {
		return nil, fmt.Errorf("target custom metadata: %w", err)
	}
	if env.Edgellm == nil {
		return nil, fmt.Errorf("target custom metadata has no \"edgellm\" object")
	}
	return env.Edgellm, nil
}

// AddOptions describe a module being added.
type AddOptions struct {
	Name             string
	Revision         int64 // 0: the current revision of Name + 1
	MinEngineVersion string
	// ABI is the version the module speaks, as the host's loader read it
	// (policy.ValidateModule); the caller validates before Add signs
	// anything.
	ABIMajor, ABIMinor int
}

// Add stages wasm as the next revision of a policy name. The module must
// already have passed the host's loader (see AddOptions.ABI); Add refuses
// a revision that is not newer than the staged or published one.
func (r *Repo) Add(wasm []byte, o AddOptions) (*Custom, error) {
	if err := ValidName(o.Name); err != nil {
		return nil, err
	}
	if o.ABIMajor <= 0 {
		return nil, fmt.Errorf("add %s: the module's ABI version is unknown (validate it first)", o.Name)
	}
	cur := int64(0)
	if tf := r.Targets()[TargetPath(o.Name)]; tf != nil {
		c, err := CustomOf(tf)
		if err != nil {
			return nil, err
		}
		cur = c.Revision
	}
	if o.Revision == 0 {
		o.Revision = cur + 1
	}
	if o.MinEngineVersion == "" {
		o.MinEngineVersion = "0.0.0"
	}
	if o.Revision <= cur {
		return nil, fmt.Errorf("add %s: revision %d is not newer than %d (in the repository)", o.Name, o.Revision, cur)
	}
	sum := sha256.Sum256(wasm)
	c := &Custom{Name: o.Name, Revision: o.Revision,
		ABI: fmt.Sprintf("%d.%d", o.ABIMajor, o.ABIMinor), ABIMin: fmt.Sprintf("%d.0", o.ABIMajor), ABIMax: fmt.Sprintf("%d.x", o.ABIMajor),
		SHA256: hex.EncodeToString(sum[:]), MinEngineVersion: o.MinEngineVersion}
	raw, err := json.Marshal(customEnvelope{Edgellm: c})
	if err != nil {
		return nil, err
	}
	tf, err := metadata.TargetFile().FromBytes(TargetPath(o.Name), wasm, "sha256")
	if err != nil {
		return nil, err
	}
	rm := json.RawMessage(raw)
	tf.Custom = &rm
	// The target file goes out first: a published snapshot never names a
	// file that is not there.
	if err := writeFileAtomic(filepath.Join(r.PublishedDir(), "targets", c.SHA256+"."+TargetPath(o.Name)), wasm, 0o644); err != nil {
		return nil, err
	}
	if r.staged == nil {
		r.staged = r.cloneTargets()
	}
	r.staged.Signed.Targets[TargetPath(o.Name)] = tf
	return c, r.writeStaged()
}

// Remove stages the removal of a policy name.
func (r *Repo) Remove(name string) error {
	if r.Targets()[TargetPath(name)] == nil {
		return fmt.Errorf("no policy %q in the repository", name)
	}
	if r.staged == nil {
		r.staged = r.cloneTargets()
	}
	delete(r.staged.Signed.Targets, TargetPath(name))
	return r.writeStaged()
}

func (r *Repo) cloneTargets() *metadata.Metadata[metadata.TargetsType] {
	t := metadata.Targets(r.targets.Signed.Expires)
	t.Signed.Version = r.targets.Signed.Version
	for k, v := range r.targets.Signed.Targets {
		t.Signed.Targets[k] = v
	}
	return t
}

func (r *Repo) writeStaged() error {
	data, err := r.staged.ToBytes(true)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(r.Dir, stagedDir, "targets.json"), data, 0o644)
}

// Publish signs and publishes: new targets (if any are staged, or if
// their signing keys changed), a new snapshot and a new timestamp. With
// nothing staged it still renews snapshot and timestamp: run it more often
// than the timestamp expiry, or devices stop accepting updates (freeze
// protection). The root must not have expired.
func (r *Repo) Publish(e Expiries) error {
	if e == (Expiries{}) {
		e = DefaultExpiries()
	}
	if err := e.Check(); err != nil {
		return err
	}
	now := r.now()
	if !r.root.Signed.Expires.After(now) {
		return fmt.Errorf("root version %d expired at %s: rotate a root key (Repo.RotateKey of role root) to sign a new one", r.root.Signed.Version, r.root.Signed.Expires.Format(time.RFC3339))
	}
	pub := r.PublishedDir()
	tgt := r.staged
	if tgt == nil && !r.signedByCurrentKeys() {
		tgt = r.cloneTargets() // keys rotated or revoked: re-sign the same targets
	}
	if tgt != nil {
		base := int64(0)
		if r.targets != nil {
			base = r.targets.Signed.Version
		}
		tgt.Signed.Version = base + 1
		tgt.Signed.Expires = now.Add(e.Targets)
		if err := r.sign(RoleTargets, tgt); err != nil {
			return err
		}
		if err := writeMeta(filepath.Join(pub, fmt.Sprintf("%d.targets.json", tgt.Signed.Version)), tgt); err != nil {
			return err
		}
	} else {
		tgt = r.targets
	}
	snap := metadata.Snapshot(now.Add(e.Snapshot))
	snap.Signed.Version = r.snapshot.Signed.Version + 1
	snap.Signed.Meta["targets.json"] = metadata.MetaFile(tgt.Signed.Version)
	if err := r.sign(RoleSnapshot, snap); err != nil {
		return err
	}
	if err := writeMeta(filepath.Join(pub, fmt.Sprintf("%d.snapshot.json", snap.Signed.Version)), snap); err != nil {
		return err
	}
	ts := metadata.Timestamp(now.Add(e.Timestamp))
	ts.Signed.Version = r.timestamp.Signed.Version + 1
	ts.Signed.Meta["snapshot.json"] = metadata.MetaFile(snap.Signed.Version)
	if err := r.sign(RoleTimestamp, ts); err != nil {
		return err
	}
	// timestamp.json last, atomically: until it is renamed in, devices
	// see the previous consistent state.
	if err := writeMeta(filepath.Join(pub, "timestamp.json"), ts); err != nil {
		return err
	}
	r.targets, r.snapshot, r.timestamp = tgt, snap, ts
	if r.staged != nil {
		r.staged = nil
		if err := os.Remove(filepath.Join(r.Dir, stagedDir, "targets.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// signedByCurrentKeys reports whether the published targets verify under
// the current root and carry no signature of a key its targets role no
// longer lists.
func (r *Repo) signedByCurrentKeys() bool {
	if r.root.VerifyDelegate(RoleTargets, r.targets) != nil {
		return false
	}
	for _, s := range r.targets.Signatures {
		if !contains(r.root.Signed.Roles[RoleTargets].KeyIDs, s.KeyID) {
			return false
		}
	}
	return true
}
