package policy

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/buildinfo"
)

// DefaultClockSkew is how far past its expiry a bundle is still accepted: a
// device clock may be this much ahead of the signer's without refusing a
// bundle that is, by the signer's clock, still valid.
const DefaultClockSkew = 5 * time.Minute

// VerifyKeys checks the signature over the manifest bytes with the trusted
// keys, minus those whose KeyID is in revoked, then the digest of
// policy.wasm. A signature naming its key ID is checked with that key only;
// an old signature without one is tried against every key still trusted.
// A bundle signed by a revoked key fails with ErrKeyRevoked, one signed by
// no trusted key with ErrBadSignature.
func (b *Bundle) VerifyKeys(keys []ed25519.PublicKey, revoked []string) error {
	if b.Signature == nil {
		return loadErrorf(b.Path, ErrInsecure, "bundle is unsigned (no %s)", SignatureFile)
	}
	if len(keys) == 0 {
		return loadErrorf(b.Path, ErrNoTrustedKey, "no trusted public key configured to verify the signature")
	}
	isRevoked := func(id string) bool {
		for _, r := range revoked {
			if r == id {
				return true
			}
		}
		return false
	}
	if b.KeyID != "" && isRevoked(b.KeyID) {
		return loadErrorf(b.Path, ErrKeyRevoked, "signed by key %s, which is revoked", b.KeyID)
	}
	var ids []string
	for _, k := range keys {
		id := KeyID(k)
		if b.KeyID != "" && id != b.KeyID {
			continue
		}
		if !ed25519.Verify(k, b.ManifestBytes, b.Signature) {
			continue
		}
		if isRevoked(id) { // an old signature without a key ID
			return loadErrorf(b.Path, ErrKeyRevoked, "signed by key %s, which is revoked", id)
		}
		return b.VerifyDigests()
	}
	for _, k := range keys {
		if id := KeyID(k); !isRevoked(id) {
			ids = append(ids, id)
		}
	}
	if b.KeyID != "" {
		return loadErrorf(b.Path, ErrBadSignature, "signature over %s by key %s does not verify with any trusted key (trusted: %s)", ManifestFile, b.KeyID, strings.Join(ids, ", "))
	}
	return loadErrorf(b.Path, ErrBadSignature, "signature over %s does not verify with any trusted key", ManifestFile)
}

// ExpiryTime parses Expires: ok is false when the manifest has none.
func (m *Manifest) ExpiryTime() (t time.Time, ok bool, err error) {
	if m.Expires == "" {
		return time.Time{}, false, nil
	}
	t, err = time.Parse(time.RFC3339, m.Expires)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("expires %q is not an RFC 3339 time", m.Expires)
	}
	return t, true, nil
}

// CheckExpiry refuses a bundle whose expiry is more than skew before now.
// A manifest without expires never expires (bundles signed before the field
// existed keep loading; docs/POLICY-UPDATES.md).
func CheckExpiry(path string, m *Manifest, now time.Time, skew time.Duration) error {
	t, ok, err := m.ExpiryTime()
	if err != nil {
		return loadErrorf(path, ErrManifest, "%v", err)
	}
	if ok && now.After(t.Add(skew)) {
		return loadErrorf(path, ErrExpired, "bundle %s revision %d expired at %s (now %s, clock-skew allowance %v)",
			m.Name, m.Revision, t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), skew)
	}
	return nil
}

// verify checks signature, digests, ABI version and engine version.
func (r *Runtime) verify(b *Bundle) error {
	switch {
	case b.Signature == nil && !r.cfg.insecure:
		return loadErrorf(b.Path, ErrInsecure, "bundle is unsigned (no %s) and the insecure flag is off", SignatureFile)
	case b.Signature == nil:
		r.log.Warn("policy: loading an unsigned bundle (insecure mode)", "path", b.Path)
		if err := b.VerifyDigests(); err != nil {
			return err
		}
	case len(r.cfg.trusted) == 0 && r.cfg.insecure:
		r.log.Warn("policy: no trusted key, signature not checked (insecure mode)", "path", b.Path)
		if err := b.VerifyDigests(); err != nil {
			return err
		}
	default:
		if err := b.VerifyKeys(r.cfg.trusted, r.cfg.revoked); err != nil {
			return err
		}
	}
	if err := CheckExpiry(b.Path, &b.Manifest, r.cfg.clock(), r.cfg.clockSkew); err != nil {
		return err
	}
	return checkCompat(b.Path, &b.Manifest, r.engineVersion, r.log)
}

// checkCompat checks a manifest's ABI major and minimum engine version.
func checkCompat(path string, m *Manifest, engineVersion string, log *slog.Logger) error {
	major, minor, err := parseABIVersion(m.ABIVersion)
	if err != nil {
		return loadErrorf(path, ErrManifest, "%v", err)
	}
	if major != abi.VersionMajor {
		return loadErrorf(path, ErrABIVersion, "manifest abi_version %d.%d: this host speaks ABI %d.x (major must match)", major, minor, abi.VersionMajor)
	}
	ok, dev, err := engineSatisfies(engineVersion, m.MinEngineVersion)
	if err != nil {
		return loadErrorf(path, ErrManifest, "min_engine_version: %v", err)
	}
	if dev && log != nil {
		log.Info("policy: development engine build, min_engine_version not enforced", "engine", engineVersion, "min_engine_version", m.MinEngineVersion)
	}
	if !ok {
		return loadErrorf(path, ErrEngineTooOld, "bundle needs engine >= %s, this is %s", m.MinEngineVersion, engineVersion)
	}
	return nil
}

// VerifyOptions says what VerifyBundle checks a bundle against.
type VerifyOptions struct {
	Keys          []ed25519.PublicKey
	Revoked       []string // key IDs
	Limits        BundleLimits
	EngineVersion string        // "" = this build's
	Now           time.Time     // zero = time.Now()
	ClockSkew     time.Duration // 0 = DefaultClockSkew
}

// VerifyBundle reads and fully verifies the bundle at path as the runtime
// would (signature against o.Keys less o.Revoked, digests, expiry at o.Now
// with o.ClockSkew, ABI major, engine version), without loading it or
// checking its revision. It is what `edgellm policy verify` runs.
func VerifyBundle(path string, o VerifyOptions) (*Bundle, error) {
	b, err := ReadBundle(path, o.Limits)
	if err != nil {
		return nil, err
	}
	if err := b.VerifyKeys(o.Keys, o.Revoked); err != nil {
		return nil, err
	}
	if o.EngineVersion == "" {
		o.EngineVersion = buildinfo.Version
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.ClockSkew == 0 {
		o.ClockSkew = DefaultClockSkew
	}
	if err := CheckExpiry(path, &b.Manifest, o.Now, o.ClockSkew); err != nil {
		return nil, err
	}
	return b, checkCompat(path, &b.Manifest, o.EngineVersion, nil)
}
