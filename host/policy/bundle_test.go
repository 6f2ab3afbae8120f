package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type signer struct {
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newSigner(t testing.TB) signer {
	pub, priv, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return signer{pub, priv}
}

// bundle signs a fixture as revision rev and writes it to dir/name.
func (s signer) bundle(t testing.TB, fixtureName string, rev int64, dst string) *Bundle {
	t.Helper()
	wasm, err := os.ReadFile(fixture(t, fixtureName))
	if err != nil {
		t.Fatal(err)
	}
	b, err := SignBundle(wasm, Manifest{Name: fixtureName, Revision: rev, ABIVersion: "1.0", MinEngineVersion: "0.1.0"}, s.priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Write(dst); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKeyRoundTrip(t *testing.T) {
	s := newSigner(t)
	pubPEM, err := MarshalPublicKey(s.pub)
	if err != nil {
		t.Fatal(err)
	}
	privPEM, err := MarshalPrivateKey(s.priv)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubPEM)
	if err != nil || !pub.Equal(s.pub) {
		t.Fatalf("public key round trip: %v", err)
	}
	priv, err := ParsePrivateKey(privPEM)
	if err != nil || !priv.Equal(s.priv) {
		t.Fatalf("private key round trip: %v", err)
	}
	if _, err := ParsePublicKey(privPEM); err == nil {
		t.Fatal("a private key parsed as a public key")
	}
}

func TestSignedBundleLoads(t *testing.T) {
	for _, ext := range []string{".tar.gz", ""} {
		t.Run("form="+ext, func(t *testing.T) {
			s := newSigner(t)
			dir := t.TempDir()
			r := newRuntime(t, testConfig().WithInsecure(false).WithTrustedKey(s.pub).WithEngineVersion("v0.2.0"))
			p1 := filepath.Join(dir, "a"+ext)
			s.bundle(t, "good_a", 1, p1)
			if err := r.LoadFile(context.Background(), p1); err != nil {
				t.Fatal(err)
			}
			if d := decideOK(t, r); d.Tier != 1 || r.Revision() != 1 {
				t.Fatalf("tier %d revision %d", d.Tier, r.Revision())
			}
			p2 := filepath.Join(dir, "b"+ext)
			s.bundle(t, "good_b", 2, p2)
			if err := r.LoadFile(context.Background(), p2); err != nil {
				t.Fatal(err)
			}
			if d := decideOK(t, r); d.Tier != 2 || r.Revision() != 2 {
				t.Fatalf("tier %d revision %d", d.Tier, r.Revision())
			}
			if _, err := VerifyBundle(p2, VerifyOptions{Keys: []ed25519.PublicKey{s.pub}, Limits: NewConfig().bundle, EngineVersion: "v0.2.0"}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Every bad bundle is refused with a precise error while good_a (revision
// 5) keeps deciding.
func TestBadBundlesRefused(t *testing.T) {
	s, other := newSigner(t), newSigner(t)
	dir := t.TempDir()
	good := s.bundle(t, "good_b", 6, filepath.Join(dir, "good.tar.gz"))
	raw, _ := os.ReadFile(filepath.Join(dir, "good.tar.gz"))

	write := func(name string, entries []tarEntry) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, makeTarGz(t, entries), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := func(wasm []byte, b *Bundle) []tarEntry {
		return []tarEntry{{name: PolicyFile, data: wasm}, {name: ManifestFile, data: b.ManifestBytes}, {name: SignatureFile, data: b.Signature}}
	}
	tampered := append([]byte(nil), good.Wasm...)
	tampered[len(tampered)-2] ^= 0xff
	sign := func(fix string, m Manifest) *Bundle {
		wasm, _ := os.ReadFile(fixture(t, fix))
		b, err := SignBundle(wasm, m, s.priv)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	m := func(rev int64, abiV, minEngine string) Manifest {
		return Manifest{Name: "x", Revision: rev, ABIVersion: abiV, MinEngineVersion: minEngine}
	}
	byOther := filepath.Join(dir, "other.tar.gz")
	other.bundle(t, "good_b", 7, byOther)
	unsigned := write("unsigned.tar.gz", files(good.Wasm, good)[:2])
	bombWasm := make([]byte, 20<<20)
	for _, tc := range []struct {
		name, path string
		kind       error
		msg        string
	}{
		{"tampered module", write("tampered.tar.gz", files(tampered, good)), ErrDigestMismatch, "digest mismatch for policy.wasm (want " + good.Manifest.Files[PolicyFile] + ", got "},
		{"truncated archive", writeBytes(t, dir, "trunc.tar.gz", raw[:len(raw)/2]), ErrBundleTruncated, "archive ends early"},
		{"signed by another key", byOther, ErrBadSignature, "does not verify with any trusted key"},
		{"unsigned", unsigned, ErrInsecure, "unsigned"},
		{"decompression bomb", write("bomb.tar.gz", append(files(good.Wasm, good)[1:], tarEntry{name: PolicyFile, data: bombWasm})), ErrBundleTooLarge, "limit 16777216"},
		{"unexpected file", write("extra.tar.gz", append(files(good.Wasm, good), tarEntry{name: "run.sh", data: []byte("x")})), ErrBundleLayout, `unexpected tar entry "run.sh"`},
		{"path traversal", write("trav.tar.gz", append(files(good.Wasm, good)[1:], tarEntry{name: "../policy.wasm", data: good.Wasm})), ErrBundleLayout, "paths are not allowed"},
		{"symlink", write("link.tar.gz", append(files(good.Wasm, good)[1:], tarEntry{name: PolicyFile, link: "/etc/passwd"})), ErrBundleLayout, "not a regular file"},
		{"too many entries", write("many.tar.gz", append(files(good.Wasm, good), tarEntry{name: "./", dir: true}, tarEntry{name: "./", dir: true}, tarEntry{name: "./", dir: true}, tarEntry{name: "./", dir: true}, tarEntry{name: "./", dir: true}, tarEntry{name: "./", dir: true})), ErrBundleTooLarge, "more than 8 tar entries"},
		{"wrong ABI major", write("abi.tar.gz", files(sign("good_b", m(8, "2.0", "0.1.0")).Wasm, sign("good_b", m(8, "2.0", "0.1.0")))), ErrABIVersion, "manifest abi_version 2.0: this host speaks ABI 1.x"},
		{"engine too old", write("engine.tar.gz", files(sign("good_b", m(8, "1.0", "v9.1.0")).Wasm, sign("good_b", m(8, "1.0", "v9.1.0")))), ErrEngineTooOld, "bundle needs engine >= v9.1.0, this is v0.2.0"},
		{"older revision", write("old.tar.gz", files(sign("good_b", m(4, "1.0", "0.1.0")).Wasm, sign("good_b", m(4, "1.0", "0.1.0")))), ErrOldRevision, "revision 4 is not newer than 5"},
		{"same revision", write("same.tar.gz", files(sign("good_b", m(5, "1.0", "0.1.0")).Wasm, sign("good_b", m(5, "1.0", "0.1.0")))), ErrOldRevision, "revision 5 is not newer than 5"},
		{"loose wasm", fixture(t, "good_b"), ErrInsecure, "loose .wasm module refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRuntime(t, testConfig().WithInsecure(false).WithTrustedKey(s.pub).WithEngineVersion("v0.2.0"))
			cur := filepath.Join(t.TempDir(), "cur")
			s.bundle(t, "good_a", 5, cur)
			if err := r.LoadFile(context.Background(), cur); err != nil {
				t.Fatal(err)
			}
			err := r.LoadFile(context.Background(), tc.path)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v\nwant %v containing %q", err, tc.kind, tc.msg)
			}
			if d := decideOK(t, r); d.Tier != 1 || r.Revision() != 5 {
				t.Fatalf("after refusal: tier %d revision %d; want good_a rev 5 still deciding", d.Tier, r.Revision())
			}
		})
	}
}

func TestBundleDirUnexpectedFile(t *testing.T) {
	s := newSigner(t)
	dir := filepath.Join(t.TempDir(), "b")
	s.bundle(t, "good_a", 1, dir)
	if _, err := ReadBundle(dir, NewConfig().bundle); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	if _, err := ReadBundle(dir, NewConfig().bundle); !errors.Is(err, ErrBundleLayout) {
		t.Fatalf("err = %v, want ErrBundleLayout", err)
	}
}

func TestSemverCompare(t *testing.T) {
	for _, tc := range []struct {
		ours, min string
		ok, dev   bool
	}{
		{"v1.2.3", "1.2.3", true, false},
		{"v1.2.3", "1.2.4", false, false},
		{"v1.10.0", "v1.9.9", true, false},
		{"v1.2.0-rc.1", "1.2.0", false, false},
		{"v1.2.0-3-gabc1234-dirty", "1.2.0", true, false},
		{"v2", "1.99.99", true, false},
		{"dev", "9.0.0", true, true},
		{"21c77ba", "0.1.0", true, true},
	} {
		ok, dev, err := engineSatisfies(tc.ours, tc.min)
		if err != nil || ok != tc.ok || dev != tc.dev {
			t.Errorf("engineSatisfies(%q, %q) = %v, %v, %v; want %v, %v", tc.ours, tc.min, ok, dev, err, tc.ok, tc.dev)
		}
	}
	if _, _, err := engineSatisfies("1.0.0", "latest"); err == nil {
		t.Error("min_engine_version \"latest\" accepted")
	}
}

type tarEntry struct {
	name, link string
	data       []byte
	dir        bool
}

func makeTarGz(t testing.TB, entries []tarEntry) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}
		switch {
		case e.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeSymlink, e.link, 0
		case e.dir:
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			tw.Write(e.data)
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func writeBytes(t testing.TB, dir, name string, data []byte) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func FuzzReadBundle(f *testing.F) {
	s := newSigner(f)
	dir := f.TempDir()
	s.bundle(f, "good_a", 1, filepath.Join(dir, "b.tar.gz"))
	raw, _ := os.ReadFile(filepath.Join(dir, "b.tar.gz"))
	f.Add(raw)
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "f.tar.gz")
		os.WriteFile(p, data, 0o644)
		b, err := ReadBundle(p, BundleLimits{MaxFileBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxEntries: 8})
		if err == nil {
			if err := b.Verify([]ed25519.PublicKey{s.pub}); err == nil && !bytes.Equal(b.ManifestBytes, b.ManifestBytes) {
				t.Fatal("unreachable")
			}
		}
	})
}

// TestGzipErrorNoStutter: a bad gzip header says "gzip: invalid header",
// not "gzip: gzip: invalid header" (issue #27).
func TestGzipErrorNoStutter(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	os.WriteFile(p, []byte{0x1f, 0x8b, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0o644)
	_, err := ReadBundle(p, BundleLimits{MaxFileBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxEntries: 8})
	if err == nil || strings.Contains(err.Error(), "gzip: gzip:") || !strings.Contains(err.Error(), "gzip: ") {
		t.Fatalf("bad gzip header: %v", err)
	}
}
