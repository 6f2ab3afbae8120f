package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Keys are stored as PEM: the public key as "PUBLIC KEY" (PKIX, as written by
// `openssl pkey -pubout`), the private key as "PRIVATE KEY" (PKCS #8). A
// public key may also be given as the base64 of its 32 raw bytes.

// GenerateKey makes a new ed25519 signing key pair.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	return ed25519.GenerateKey(rand.Reader)
}

// MarshalPublicKey encodes pub as PEM "PUBLIC KEY".
func MarshalPublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// MarshalPrivateKey encodes priv as PEM "PRIVATE KEY".
func MarshalPrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParsePublicKey decodes a PEM "PUBLIC KEY" or base64 raw ed25519 key.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	if blk, _ := pem.Decode(data); blk != nil {
		if blk.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("PEM block is %q, want \"PUBLIC KEY\"", blk.Type)
		}
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, err
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("public key is %T, want ed25519", k)
		}
		return pub, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("not a PEM \"PUBLIC KEY\" nor base64 of 32 raw ed25519 bytes")
	}
	return ed25519.PublicKey(raw), nil
}

// ParsePrivateKey decodes a PEM "PRIVATE KEY" (PKCS #8) ed25519 key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM \"PRIVATE KEY\" block")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key is %T, want ed25519", k)
	}
	return priv, nil
}

// ReadPublicKeyFile reads a public key file (see ParsePublicKey).
func ReadPublicKeyFile(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return k, nil
}

// ReadPrivateKeyFile reads a private key file (see ParsePrivateKey).
func ReadPrivateKeyFile(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return k, nil
}

// SignBundle makes a bundle of wasm: it sets m.Files to the module's digest,
// encodes the manifest and signs its bytes with priv.
func SignBundle(wasm []byte, m Manifest, priv ed25519.PrivateKey) (*Bundle, error) {
	sum := sha256.Sum256(wasm)
	m.Files = map[string]string{PolicyFile: hex.EncodeToString(sum[:])}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	data = append(data, '\n')
	if _, err := parseManifest(data); err != nil {
		return nil, fmt.Errorf("manifest: %v", err)
	}
	id := KeyID(priv.Public().(ed25519.PublicKey))
	return &Bundle{Manifest: m, ManifestBytes: data, Signature: ed25519.Sign(priv, data), KeyID: id, Wasm: wasm}, nil
}

// IsTarGzPath reports whether a bundle path names an archive (.tar.gz, .tgz)
// rather than a directory.
func IsTarGzPath(path string) bool {
	return strings.HasSuffix(path, ".tar.gz") || strings.HasSuffix(path, ".tgz")
}

// Write writes the bundle to path: a .tar.gz when the name ends in .tar.gz or
// .tgz, else a directory. Files are written to a temporary name and renamed,
// so a watcher never sees a half-written archive.
func (b *Bundle) Write(path string) error {
	files := []struct {
		name string
		data []byte
	}{
		{PolicyFile, b.Wasm},
		{ManifestFile, b.ManifestBytes},
		{SignatureFile, encodeSignature(b.KeyID, b.Signature)},
	}
	if !IsTarGzPath(path) {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return err
		}
		for _, f := range files {
			if err := writeFileAtomic(filepath.Join(path, f.name), f.data, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return writeFileAtomic(path, buf.Bytes(), 0o644)
}

// encodeSignature writes manifest.sig: "KEYID BASE64\n", or the base64
// alone when the key ID is unknown.
func encodeSignature(keyID string, sig []byte) []byte {
	s := base64.StdEncoding.EncodeToString(sig) + "\n"
	if keyID != "" {
		s = keyID + " " + s
	}
	return []byte(s)
}

// writeFileAtomic writes data to a temporary file beside path and renames it.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), perm)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}
