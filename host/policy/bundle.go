package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A bundle is a signed policy: exactly these three files, as a directory or
// as a .tar.gz holding them at its root.
const (
	PolicyFile    = "policy.wasm"   // the module
	ManifestFile  = "manifest.json" // Manifest, JSON
	SignatureFile = "manifest.sig"  // "KEYID BASE64": the signing key's ID and the base64 ed25519 signature over the exact manifest bytes
)

// Manifest describes a bundle. The signature covers its exact bytes, and
// through Files the digest of every other file.
type Manifest struct {
	Name             string            `json:"name"`
	Revision         int64             `json:"revision"`           // > 0, strictly increasing across updates
	ABIVersion       string            `json:"abi_version"`        // "MAJOR.MINOR" of the ABI the module was built for
	MinEngineVersion string            `json:"min_engine_version"` // semver; the host refuses the bundle if it is older
	Files            map[string]string `json:"files"`              // name -> lowercase hex sha256
	// Expires (RFC 3339, optional) is when the bundle stops being accepted;
	// see CheckExpiry. Bundles signed before it existed have none and load.
	Expires string `json:"expires,omitempty"`
}

// BundleLimits bound what reading a bundle may cost (decompression bombs).
type BundleLimits struct {
	MaxFileBytes  int64 // per file, uncompressed
	MaxTotalBytes int64 // all files together, uncompressed (and the .tar.gz itself)
	MaxEntries    int   // tar entries (directories included)
}

// Bundle is a bundle read into memory. ReadBundle does not verify it: call
// Verify.
type Bundle struct {
	Path          string
	Manifest      Manifest
	ManifestBytes []byte
	Signature     []byte // raw 64 bytes, nil if the bundle has no manifest.sig
	KeyID         string // ID of the signing key named by manifest.sig ("" in old signatures)
	Wasm          []byte
}

var bundleFiles = map[string]bool{PolicyFile: true, ManifestFile: true, SignatureFile: true}

// ReadBundle reads a bundle directory or .tar.gz within the limits, checking
// its layout (only the three known files, regular files, no paths) and
// parsing the manifest. It does not check signature or digests.
func ReadBundle(path string, lim BundleLimits) (*Bundle, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, loadErrorf(path, ErrNotPolicy, "%v", err)
	}
	var files map[string][]byte
	if fi.IsDir() {
		files, err = readBundleDir(path, lim)
	} else {
		files, err = readBundleTarGz(path, fi.Size(), lim)
	}
	if err != nil {
		return nil, err
	}
	b := &Bundle{Path: path, Wasm: files[PolicyFile], ManifestBytes: files[ManifestFile]}
	for _, name := range []string{PolicyFile, ManifestFile} {
		if _, ok := files[name]; !ok {
			return nil, loadErrorf(path, ErrBundleLayout, "bundle has no %s", name)
		}
	}
	if sig, ok := files[SignatureFile]; ok {
		if b.KeyID, b.Signature, err = decodeSignature(sig); err != nil {
			return nil, loadErrorf(path, ErrBadSignature, "%s: %v", SignatureFile, err)
		}
	}
	if b.Manifest, err = parseManifest(b.ManifestBytes); err != nil {
		return nil, loadErrorf(path, ErrManifest, "%s: %v", ManifestFile, err)
	}
	return b, nil
}

func readBundleDir(dir string, lim BundleLimits) (map[string][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, loadErrorf(dir, ErrBundleLayout, "%v", err)
	}
	if len(ents) > lim.MaxEntries {
		return nil, loadErrorf(dir, ErrBundleTooLarge, "%d entries, limit %d", len(ents), lim.MaxEntries)
	}
	files := map[string][]byte{}
	var total int64
	for _, e := range ents {
		name := e.Name()
		if !bundleFiles[name] {
			return nil, loadErrorf(dir, ErrBundleLayout, "unexpected file %q in bundle (want only %s)", name, bundleFileList())
		}
		if !e.Type().IsRegular() {
			return nil, loadErrorf(dir, ErrBundleLayout, "%s is not a regular file (%v)", name, e.Type())
		}
		info, err := e.Info()
		if err != nil {
			return nil, loadErrorf(dir, ErrBundleLayout, "%v", err)
		}
		if info.Size() > lim.MaxFileBytes {
			return nil, loadErrorf(dir, ErrBundleTooLarge, "%s is %d bytes, limit %d", name, info.Size(), lim.MaxFileBytes)
		}
		if total += info.Size(); total > lim.MaxTotalBytes {
			return nil, loadErrorf(dir, ErrBundleTooLarge, "files total more than %d bytes", lim.MaxTotalBytes)
		}
		data, err := readLimited(filepath.Join(dir, name), lim.MaxFileBytes)
		if err != nil {
			return nil, loadErrorf(dir, ErrBundleTooLarge, "%s: %v", name, err)
		}
		files[name] = data
	}
	return files, nil
}

func readBundleTarGz(path string, size int64, lim BundleLimits) (map[string][]byte, error) {
	if size > lim.MaxTotalBytes {
		return nil, loadErrorf(path, ErrBundleTooLarge, "archive is %d bytes, limit %d", size, lim.MaxTotalBytes)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, loadErrorf(path, ErrNotPolicy, "%v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		msg := err.Error() // gzip's own errors already say "gzip: "
		if !strings.HasPrefix(msg, "gzip: ") {
			msg = "gzip: " + msg
		}
		return nil, loadErrorf(path, ErrBundleTruncated, "%s", msg)
	}
	// Count every decompressed byte, headers and padding included.
	budget := &countingReader{r: zr, left: lim.MaxTotalBytes + 64<<10}
	tr := tar.NewReader(budget)
	files := map[string][]byte{}
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, tarError(path, budget, err)
		}
		if n >= lim.MaxEntries {
			return nil, loadErrorf(path, ErrBundleTooLarge, "more than %d tar entries", lim.MaxEntries)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if hdr.Typeflag == tar.TypeDir && (name == "" || name == ".") {
			continue
		}
		if name != filepath.Base(name) || strings.ContainsAny(name, `/\`) || name == ".." || strings.HasPrefix(hdr.Name, "/") {
			return nil, loadErrorf(path, ErrBundleLayout, "tar entry %q: paths are not allowed (want only %s at the root)", hdr.Name, bundleFileList())
		}
		if !bundleFiles[name] {
			return nil, loadErrorf(path, ErrBundleLayout, "unexpected tar entry %q (want only %s)", hdr.Name, bundleFileList())
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil, loadErrorf(path, ErrBundleLayout, "tar entry %q is not a regular file (type %q)", hdr.Name, hdr.Typeflag)
		}
		if _, dup := files[name]; dup {
			return nil, loadErrorf(path, ErrBundleLayout, "tar entry %q appears twice", hdr.Name)
		}
		if hdr.Size < 0 || hdr.Size > lim.MaxFileBytes {
			return nil, loadErrorf(path, ErrBundleTooLarge, "%s is %d bytes uncompressed, limit %d", name, hdr.Size, lim.MaxFileBytes)
		}
		if total += hdr.Size; total > lim.MaxTotalBytes {
			return nil, loadErrorf(path, ErrBundleTooLarge, "files total more than %d bytes uncompressed", lim.MaxTotalBytes)
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return nil, tarError(path, budget, fmt.Errorf("%s: %w", name, err))
		}
		files[name] = data
	}
	return files, nil
}

func tarError(path string, budget *countingReader, err error) error {
	if budget.exceeded {
		return loadErrorf(path, ErrBundleTooLarge, "more than %d bytes uncompressed", budget.limit())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return loadErrorf(path, ErrBundleTruncated, "archive ends early: %v", err)
	}
	return loadErrorf(path, ErrBundleTruncated, "tar: %v", err)
}

// countingReader fails once more than left bytes have been read.
type countingReader struct {
	r        io.Reader
	left     int64
	read     int64
	exceeded bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.exceeded = true
		return 0, ErrBundleTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	c.read += int64(n)
	return n, err
}

func (c *countingReader) limit() int64 { return c.left + c.read }

func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("more than %d bytes", max)
	}
	return data, nil
}

func bundleFileList() string { return PolicyFile + ", " + ManifestFile + ", " + SignatureFile }

// decodeSignature parses manifest.sig: "KEYID BASE64" (the current form),
// or, as written before key IDs existed, the base64 alone or 64 raw bytes.
func decodeSignature(data []byte) (keyID string, sig []byte, err error) {
	if len(data) == ed25519.SignatureSize {
		return "", data, nil // raw
	}
	text := strings.TrimSpace(string(data))
	if id, rest, ok := strings.Cut(text, " "); ok {
		if !validKeyID(id) {
			return "", nil, fmt.Errorf("key ID %q is not %d lowercase hex digits", id, KeyIDLen)
		}
		keyID, text = id, strings.TrimSpace(rest)
	}
	sig, err = base64.StdEncoding.DecodeString(text)
	if err != nil {
		return "", nil, fmt.Errorf("not base64: %v", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return "", nil, fmt.Errorf("signature has %d bytes, want %d", len(sig), ed25519.SignatureSize)
	}
	return keyID, sig, nil
}

func parseManifest(data []byte) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, err
	}
	if dec.More() {
		return m, errors.New("trailing data after the JSON object")
	}
	switch {
	case m.Name == "":
		return m, errors.New("name is empty")
	case m.Revision <= 0:
		return m, fmt.Errorf("revision %d must be positive", m.Revision)
	}
	if _, _, err := parseABIVersion(m.ABIVersion); err != nil {
		return m, err
	}
	if _, err := parseSemver(m.MinEngineVersion); err != nil {
		return m, fmt.Errorf("min_engine_version: %v", err)
	}
	if _, _, err := m.ExpiryTime(); err != nil {
		return m, err
	}
	names := make([]string, 0, len(m.Files))
	for name, sum := range m.Files {
		names = append(names, name)
		if name != PolicyFile {
			return m, fmt.Errorf("files lists %q (only %s is allowed)", name, PolicyFile)
		}
		if len(sum) != 2*sha256.Size || strings.ToLower(sum) != sum {
			return m, fmt.Errorf("files[%q] = %q is not a lowercase hex sha256", name, sum)
		}
		if _, err := hex.DecodeString(sum); err != nil {
			return m, fmt.Errorf("files[%q]: %v", name, err)
		}
	}
	sort.Strings(names)
	if len(names) != 1 {
		return m, fmt.Errorf("files must list exactly %s, got %v", PolicyFile, names)
	}
	return m, nil
}

// parseABIVersion parses "MAJOR.MINOR".
func parseABIVersion(s string) (major, minor int, err error) {
	a, b, ok := strings.Cut(s, ".")
	if ok {
		major, err = strconv.Atoi(a)
		if err == nil {
			minor, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || major < 0 || minor < 0 {
		return 0, 0, fmt.Errorf("abi_version %q is not MAJOR.MINOR", s)
	}
	return major, minor, nil
}

// Verify checks the signature over the manifest bytes against any of keys,
// then the digest of policy.wasm. With no keys it fails with ErrNoTrustedKey;
// an unsigned bundle fails with ErrInsecure. See VerifyKeys for revocation.
func (b *Bundle) Verify(keys []ed25519.PublicKey) error { return b.VerifyKeys(keys, nil) }

// VerifyDigests checks the files against the manifest's digests.
func (b *Bundle) VerifyDigests() error {
	got := sha256.Sum256(b.Wasm)
	if want := b.Manifest.Files[PolicyFile]; want != hex.EncodeToString(got[:]) {
		return loadErrorf(b.Path, ErrDigestMismatch, "digest mismatch for %s (want %s, got %s)", PolicyFile, want, hex.EncodeToString(got[:]))
	}
	return nil
}
