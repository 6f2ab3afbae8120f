package update

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// RotateKey (like Revoke) also publishes whatever is staged.
//
// RotateKey replaces the keys of role (all of them, or only oldKeyID) by
// new ones (one per key removed), signs a new root version with the old root's keys and the
// new ones, and republishes. The device picks the new root up at its next
// update check. It returns the new key IDs, comma-separated.
func (r *Repo) RotateKey(role, oldKeyID string, e Expiries) (string, error) {
	if !isTopRole(role) {
		return "", fmt.Errorf("role %q: one of %s", role, strings.Join(topRoles, ", "))
	}
	next := r.nextRoot(e)
	old := append([]string(nil), next.Signed.Roles[role].KeyIDs...)
	if oldKeyID != "" && !contains(old, oldKeyID) {
		return "", fmt.Errorf("key %s is not a %s key", oldKeyID, role)
	}
	var ids []string
	for _, id := range old {
		if oldKeyID != "" && id != oldKeyID {
			continue
		}
		// One new key per key removed: the threshold stays reachable.
		k, err := r.Keys.NewKey()
		if err != nil {
			return "", err
		}
		if err := next.Signed.AddKey(k, role); err != nil {
			return "", err
		}
		if err := next.Signed.RevokeKey(id, role); err != nil {
			return "", err
		}
		nid, _ := k.ID()
		ids = append(ids, nid)
	}
	return strings.Join(ids, ","), r.commitRoot(next, e)
}

// Revoke removes keyID from every role that lists it, in a new root
// version, and republishes. It refuses when a role would be left with
// fewer keys than its threshold (rotate instead).
func (r *Repo) Revoke(keyID string, e Expiries) error {
	next := r.nextRoot(e)
	found := false
	for _, role := range topRoles {
		ro := next.Signed.Roles[role]
		if !contains(ro.KeyIDs, keyID) {
			continue
		}
		found = true
		if len(ro.KeyIDs)-1 < ro.Threshold {
			return fmt.Errorf("revoking %s would leave role %s with %d key(s) for threshold %d: rotate it out instead (Repo.RotateKey of role %s, key %s)", keyID, role, len(ro.KeyIDs)-1, ro.Threshold, role, keyID)
		}
		if err := next.Signed.RevokeKey(keyID, role); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("key %s is in no role of root version %d", keyID, r.root.Signed.Version)
	}
	return r.commitRoot(next, e)
}

func (r *Repo) nextRoot(e Expiries) *metadata.Metadata[metadata.RootType] {
	if e == (Expiries{}) {
		e = DefaultExpiries()
	}
	data, _ := r.root.ToBytes(false)
	next, _ := metadata.Root().FromBytes(data)
	next.ClearSignatures()
	next.Signed.Version++
	next.Signed.Expires = r.now().Add(e.Root)
	return next
}

func (r *Repo) commitRoot(next *metadata.Metadata[metadata.RootType], e Expiries) error {
	if e == (Expiries{}) {
		e = DefaultExpiries()
	}
	if err := e.Check(); err != nil {
		return err
	}
	if err := r.signRoot(next, r.root); err != nil {
		return err
	}
	r.root = next
	if err := r.writeRoot(); err != nil {
		return err
	}
	// Timestamp and snapshot keys may have changed: a new snapshot and
	// timestamp (and targets, if their keys changed) under the new root.
	return r.Publish(e)
}

// signRoot signs root with every key the keyring has among the new root's
// and the previous root's root keys, then checks both thresholds (TUF: a
// new root is signed by a threshold of the old root's keys and of its
// own).
func (r *Repo) signRoot(root, prev *metadata.Metadata[metadata.RootType]) error {
	if !root.Signed.Expires.After(r.now()) {
		return fmt.Errorf("refusing to sign root version %d: it expires at %s, already past", root.Signed.Version, root.Signed.Expires.Format(time.RFC3339))
	}
	ids := append([]string(nil), root.Signed.Roles[RoleRoot].KeyIDs...)
	if prev != nil {
		for _, id := range prev.Signed.Roles[RoleRoot].KeyIDs {
			if !contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		s, err := r.Keys.Signer(id)
		if errors.Is(err, ErrNoKey) {
			continue
		}
		if err != nil {
			return err
		}
		if _, err := root.Sign(s); err != nil {
			return err
		}
	}
	if err := root.VerifyDelegate(RoleRoot, root); err != nil {
		return fmt.Errorf("root version %d: not enough of its own root keys in the keyring: %w", root.Signed.Version, err)
	}
	if prev != nil {
		if err := prev.VerifyDelegate(RoleRoot, root); err != nil {
			return fmt.Errorf("root version %d: not enough of version %d's root keys in the keyring: %w", root.Signed.Version, prev.Signed.Version, err)
		}
	}
	return nil
}

// sign signs md for role with every key of the role the keyring holds and
// checks the threshold.
func (r *Repo) sign(role string, md any) error {
	type signable interface {
		Sign(Signer) (*metadata.Signature, error)
		ClearSignatures()
	}
	var exp time.Time
	switch m := md.(type) {
	case *metadata.Metadata[metadata.TargetsType]:
		exp = m.Signed.Expires
	case *metadata.Metadata[metadata.SnapshotType]:
		exp = m.Signed.Expires
	case *metadata.Metadata[metadata.TimestampType]:
		exp = m.Signed.Expires
	}
	if !exp.After(r.now()) {
		return fmt.Errorf("refusing to sign %s: it expires at %s, already past", role, exp.Format(time.RFC3339))
	}
	s := md.(signable)
	s.ClearSignatures()
	for _, id := range r.root.Signed.Roles[role].KeyIDs {
		signer, err := r.Keys.Signer(id)
		if errors.Is(err, ErrNoKey) {
			continue
		}
		if err != nil {
			return err
		}
		if _, err := s.Sign(signer); err != nil {
			return err
		}
	}
	if err := r.root.VerifyDelegate(role, md); err != nil {
		return fmt.Errorf("%s: threshold %d not met by the keys in the keyring: %w", role, r.root.Signed.Roles[role].Threshold, err)
	}
	return nil
}

func (r *Repo) writeRoot() error {
	pub := r.PublishedDir()
	if err := writeMeta(filepath.Join(pub, fmt.Sprintf("%d.root.json", r.root.Signed.Version)), r.root); err != nil {
		return err
	}
	return writeMeta(filepath.Join(pub, "root.json"), r.root)
}

type bytesMeta interface{ ToBytes(bool) ([]byte, error) }

func writeMeta(path string, md bytesMeta) error {
	data, err := md.ToBytes(true)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o644)
}

// Status describes the repository.
func (r *Repo) Status() string {
	var b strings.Builder
	now := r.now()
	left := func(t time.Time) string {
		if !t.After(now) {
			return "EXPIRED " + t.Format(time.RFC3339)
		}
		d := t.Sub(now)
		if d >= 24*time.Hour {
			return fmt.Sprintf("%s (in %dd %dh)", t.Format(time.RFC3339), d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
		}
		return t.Format(time.RFC3339) + " (in " + d.Truncate(time.Minute).String() + ")"
	}
	fmt.Fprintf(&b, "repository %s\n", r.Dir)
	fmt.Fprintf(&b, "root      version %d, expires %s\n", r.root.Signed.Version, left(r.root.Signed.Expires))
	fmt.Fprintf(&b, "targets   version %d, expires %s\n", r.targets.Signed.Version, left(r.targets.Signed.Expires))
	fmt.Fprintf(&b, "snapshot  version %d, expires %s\n", r.snapshot.Signed.Version, left(r.snapshot.Signed.Expires))
	fmt.Fprintf(&b, "timestamp version %d, expires %s\n", r.timestamp.Signed.Version, left(r.timestamp.Signed.Expires))
	for _, role := range topRoles {
		ro := r.root.Signed.Roles[role]
		fmt.Fprintf(&b, "role %-9s threshold %d of %d:", role, ro.Threshold, len(ro.KeyIDs))
		for _, id := range ro.KeyIDs {
			have := ""
			if _, err := r.Keys.Signer(id); err != nil {
				have = " (not in keyring)"
			}
			fmt.Fprintf(&b, " %s%s", id[:16], have)
		}
		b.WriteByte('\n')
	}
	names := make([]string, 0, len(r.targets.Signed.Targets))
	for p := range r.targets.Signed.Targets {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		c, err := CustomOf(r.targets.Signed.Targets[p])
		if err != nil {
			fmt.Fprintf(&b, "policy %s: %v\n", p, err)
			continue
		}
		fmt.Fprintf(&b, "policy %s revision %d, ABI %s, %d bytes, sha256 %s\n", c.Name, c.Revision, c.ABI, r.targets.Signed.Targets[p].Length, c.SHA256[:16])
	}
	if r.staged != nil {
		fmt.Fprintf(&b, "staged changes: run `edgellm policy repo publish %s`\n", r.Dir)
	}
	return b.String()
}

func isTopRole(role string) bool { return contains(topRoles, role) }

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// writeFileAtomic writes data to a temporary file in path's directory,
// syncs it and renames it over path.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
