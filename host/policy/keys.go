package policy

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// KeyIDLen is the length in hex digits of a key ID.
const KeyIDLen = 16

// RevokedFile is the revocation list inside a trust directory: one key ID
// per line, '#' starts a comment.
const RevokedFile = "revoked"

// KeyID names a public key: the first 8 bytes of the sha256 of its 32 raw
// bytes, as 16 lowercase hex digits. A signature file records the ID of the
// key that made it, so a host with several trusted keys knows which one to
// check and a revocation list can name keys without holding them.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:KeyIDLen/2])
}

// validKeyID reports whether s has the form of a key ID.
func validKeyID(s string) bool {
	if len(s) != KeyIDLen || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// TrustDir is what a trust directory holds: every *.pub file is a trusted
// public key (PEM or base64, see ParsePublicKey) and the optional file
// "revoked" lists revoked key IDs. Keys are rotated by adding a .pub file,
// signing new bundles with the new key, then adding the old key's ID to
// "revoked"; no engine release is needed (docs/POLICY-UPDATES.md).
type TrustDir struct {
	Keys    []ed25519.PublicKey // sorted by KeyID
	Revoked []string            // key IDs, sorted
}

// ReadTrustDir reads a trust directory. A file that does not parse is an
// error naming it; a directory with no .pub file is an error too.
func ReadTrustDir(dir string) (TrustDir, error) {
	var td TrustDir
	ents, err := os.ReadDir(dir)
	if err != nil {
		return td, err
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".pub") {
			continue
		}
		k, err := ReadPublicKeyFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return td, err
		}
		td.Keys = append(td.Keys, k)
	}
	if len(td.Keys) == 0 {
		return td, fmt.Errorf("%s: no trusted key (*.pub) in the directory", dir)
	}
	sort.Slice(td.Keys, func(i, j int) bool { return KeyID(td.Keys[i]) < KeyID(td.Keys[j]) })
	rp := filepath.Join(dir, RevokedFile)
	data, err := os.ReadFile(rp)
	switch {
	case os.IsNotExist(err):
		return td, nil
	case err != nil:
		return td, err
	}
	if td.Revoked, err = ParseRevocationList(data); err != nil {
		return td, fmt.Errorf("%s: %v", rp, err)
	}
	return td, nil
}

// ParseRevocationList parses one key ID per line; blank lines and text after
// '#' are ignored.
func ParseRevocationList(data []byte) ([]string, error) {
	var ids []string
	for i, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !validKeyID(line) {
			return nil, fmt.Errorf("line %d: %q is not a key ID (%d lowercase hex digits)", i+1, line, KeyIDLen)
		}
		ids = append(ids, line)
	}
	sort.Strings(ids)
	return ids, nil
}

// ReadTrust reads what a host trusts from path: a public key file (PEM, or
// the base64 of its 32 bytes), or a trust directory (ReadTrustDir).
func ReadTrust(path string) (TrustDir, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return TrustDir{}, err
	}
	if fi.IsDir() {
		return ReadTrustDir(path)
	}
	k, err := ReadPublicKeyFile(path)
	if err != nil {
		return TrustDir{}, err
	}
	return TrustDir{Keys: []ed25519.PublicKey{k}}, nil
}
