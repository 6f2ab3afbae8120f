package update

import (
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/edgellm/edgellm/host/policy"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// Signer signs TUF metadata. It is sigstore's signature.Signer, the
// interface go-tuf signs with: an ed25519 key file (FileKeyring) today; a
// PKCS#11 HSM or a cloud KMS signer (sigstore/pkg/signature/kms/...)
// implements the same interface and plugs into a Keyring.
type Signer = signature.Signer

// Keyring finds the signer of a key ID and makes new keys. The repository
// never reads private key material itself.
type Keyring interface {
	// Signer returns the signer for keyID, or ErrNoKey.
	Signer(keyID string) (Signer, error)
	// NewKey makes a key and returns its TUF public key.
	NewKey() (*metadata.Key, error)
}

// ErrNoKey: the keyring has no signer for a key ID.
var ErrNoKey = errors.New("no such key in the keyring")

// FileKeyring keeps ed25519 private keys as PEM (PKCS#8) files named
// KEYID.key, mode 0600, in Dir.
type FileKeyring struct{ Dir string }

var keyIDRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (k FileKeyring) Signer(keyID string) (Signer, error) {
	if !keyIDRe.MatchString(keyID) {
		return nil, fmt.Errorf("key ID %q: not 64 hex digits", keyID)
	}
	path := filepath.Join(k.Dir, keyID+".key")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoKey, keyID)
	}
	priv, err := policy.ReadPrivateKeyFile(path)
	if err != nil {
		return nil, err
	}
	return signature.LoadED25519Signer(priv)
}

func (k FileKeyring) NewKey() (*metadata.Key, error) {
	pub, priv, err := policy.GenerateKey()
	if err != nil {
		return nil, err
	}
	key, err := metadata.KeyFromPublicKey(pub)
	if err != nil {
		return nil, err
	}
	id, err := key.ID()
	if err != nil {
		return nil, err
	}
	pem, err := policy.MarshalPrivateKey(priv)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(k.Dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(k.Dir, id+".key"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(pem); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return key, f.Close()
}

// keyID is the TUF key ID of an ed25519 public key.
func keyID(pub ed25519.PublicKey) string {
	k, err := metadata.KeyFromPublicKey(pub)
	if err != nil {
		return ""
	}
	id, _ := k.ID()
	return id
}

var _ crypto.PublicKey = ed25519.PublicKey(nil)
