package policy

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// signBundle signs fixture fix as m with priv and writes it to dst.
func signBundle(t testing.TB, fix string, m Manifest, priv ed25519.PrivateKey, dst string) *Bundle {
	t.Helper()
	wasm, err := os.ReadFile(fixture(t, fix))
	if err != nil {
		t.Fatal(err)
	}
	if m.ABIVersion == "" {
		m.ABIVersion, m.MinEngineVersion = "1.0", "0.0.0"
	}
	b, err := SignBundle(wasm, m, priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Write(dst); err != nil {
		t.Fatal(err)
	}
	return b
}

// writeTrustDir writes keys as NAME.pub files and the revocation list.
func writeTrustDir(t testing.TB, dir string, keys map[string]ed25519.PublicKey, revoked ...string) TrustDir {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	for name, k := range keys {
		pem, err := MarshalPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".pub"), pem, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, RevokedFile), []byte("# revoked keys\n"+strings.Join(revoked, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	td, err := ReadTrustDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return td
}

func TestSignatureNamesKeyID(t *testing.T) {
	s := newSigner(t)
	p := filepath.Join(t.TempDir(), "b")
	signBundle(t, "good_a", Manifest{Name: "p", Revision: 1}, s.priv, p)
	sig, _ := os.ReadFile(filepath.Join(p, SignatureFile))
	if id, _, _ := strings.Cut(string(sig), " "); id != KeyID(s.pub) || len(id) != KeyIDLen {
		t.Fatalf("manifest.sig = %q, want it to start with key ID %s", sig, KeyID(s.pub))
	}
	b, err := ReadBundle(p, NewConfig().bundle)
	if err != nil || b.KeyID != KeyID(s.pub) {
		t.Fatalf("ReadBundle: key ID %q, %v", b.KeyID, err)
	}
}

// TestKeyRotation is the documented rotation (docs/POLICY-UPDATES.md):
// trust a new key beside the old one, sign with the new key, then revoke
// the old key. Only the trust directory changes, never the engine.
func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	oldK, newK := newSigner(t), newSigner(t)
	dir, trust, state := t.TempDir(), filepath.Join(t.TempDir(), "trust"), t.TempDir()
	start := func(td TrustDir) *Runtime {
		return newRuntime(t, testConfig().WithInsecure(false).WithTrustDir(td).WithStateDir(state))
	}
	byOld := func(rev int64) string {
		p := filepath.Join(dir, "old"+string(rune('0'+rev))+".tar.gz")
		signBundle(t, "good_a", Manifest{Name: "p", Revision: rev}, oldK.priv, p)
		return p
	}
	byNew := func(rev int64) string {
		p := filepath.Join(dir, "new"+string(rune('0'+rev))+".tar.gz")
		signBundle(t, "good_b", Manifest{Name: "p", Revision: rev}, newK.priv, p)
		return p
	}

	// 1. Only the old key: its bundles load, the new key's are refused.
	r := start(writeTrustDir(t, trust, map[string]ed25519.PublicKey{"old": oldK.pub}))
	if err := r.LoadFile(ctx, byOld(1)); err != nil {
		t.Fatal(err)
	}
	if err := r.LoadFile(ctx, byNew(2)); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), KeyID(newK.pub)) {
		t.Fatalf("new key before it is trusted: %v", err)
	}
	r.Close(ctx)

	// 2. Both trusted: bundles by either key load.
	r = start(writeTrustDir(t, trust, map[string]ed25519.PublicKey{"old": oldK.pub, "new": newK.pub}))
	if err := r.LoadFile(ctx, byNew(2)); err != nil {
		t.Fatal(err)
	}
	if err := r.LoadFile(ctx, byOld(3)); err != nil {
		t.Fatal(err)
	}
	r.Close(ctx)

	// 3. The old key revoked (its .pub may stay): its bundles are refused,
	// even newer ones, even with the key ID stripped from the signature.
	r = start(writeTrustDir(t, trust, map[string]ed25519.PublicKey{"old": oldK.pub, "new": newK.pub}, KeyID(oldK.pub)))
	err := r.LoadFile(ctx, byOld(4))
	if !errors.Is(err, ErrKeyRevoked) || !strings.Contains(err.Error(), KeyID(oldK.pub)) {
		t.Fatalf("revoked key: %v", err)
	}
	noID := filepath.Join(dir, "noid")
	b := signBundle(t, "good_a", Manifest{Name: "p", Revision: 5}, oldK.priv, noID)
	os.WriteFile(filepath.Join(noID, SignatureFile), encodeSignature("", b.Signature), 0o644)
	if err := r.LoadFile(ctx, noID); !errors.Is(err, ErrKeyRevoked) {
		t.Fatalf("revoked key, signature without key ID: %v", err)
	}
	// A forged key ID naming the new key does not help.
	os.WriteFile(filepath.Join(noID, SignatureFile), encodeSignature(KeyID(newK.pub), b.Signature), 0o644)
	if err := r.LoadFile(ctx, noID); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("revoked key, forged key ID: %v", err)
	}
	if err := r.LoadFile(ctx, byNew(6)); err != nil {
		t.Fatal(err)
	}
	if r.Revision() != 6 {
		t.Fatalf("revision %d after rotation", r.Revision())
	}
}

func TestOldSignatureWithoutKeyIDLoads(t *testing.T) {
	s := newSigner(t)
	p := filepath.Join(t.TempDir(), "b")
	b := signBundle(t, "good_a", Manifest{Name: "p", Revision: 1}, s.priv, p)
	// The form written before key IDs: base64 alone.
	os.WriteFile(filepath.Join(p, SignatureFile), encodeSignature("", b.Signature), 0o644)
	r := newRuntime(t, testConfig().WithInsecure(false).WithTrustedKey(newSigner(t).pub).WithTrustedKey(s.pub))
	if err := r.LoadFile(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func TestTrustDirErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadTrustDir(dir); err == nil || !strings.Contains(err.Error(), "no trusted key") {
		t.Fatalf("empty dir: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "a.pub"), []byte("nonsense"), 0o644)
	if _, err := ReadTrustDir(dir); err == nil || !strings.Contains(err.Error(), "a.pub") {
		t.Fatalf("bad key file: %v", err)
	}
	s := newSigner(t)
	pem, _ := MarshalPublicKey(s.pub)
	os.WriteFile(filepath.Join(dir, "a.pub"), pem, 0o644)
	os.WriteFile(filepath.Join(dir, RevokedFile), []byte("not-a-key-id\n"), 0o644)
	if _, err := ReadTrustDir(dir); err == nil || !strings.Contains(err.Error(), `line 1: "not-a-key-id"`) {
		t.Fatalf("bad revocation list: %v", err)
	}
	if _, err := NewRuntime(context.Background(), NewConfig().WithRevokedKey("xyz")); err == nil {
		t.Fatal("bad revoked key ID accepted by NewRuntime")
	}
}

func TestExpiry(t *testing.T) {
	ctx := context.Background()
	s := newSigner(t)
	dir := t.TempDir()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	cfg := testConfig().WithInsecure(false).WithTrustedKey(s.pub).WithClock(func() time.Time { return now })
	exp := func(rev int64, at time.Time) string {
		p := filepath.Join(dir, "e"+at.Format("150405")+".tar.gz")
		signBundle(t, "good_a", Manifest{Name: "p", Revision: rev, Expires: at.Format(time.RFC3339)}, s.priv, p)
		return p
	}
	for _, tc := range []struct {
		name    string
		expires time.Time
		ok      bool
	}{
		{"future", now.Add(24 * time.Hour), true},
		{"just past, within skew", now.Add(-DefaultClockSkew + time.Second), true},
		{"past the skew", now.Add(-DefaultClockSkew - time.Second), false},
		{"long ago", now.Add(-30 * 24 * time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRuntime(t, cfg)
			err := r.LoadFile(ctx, exp(1, tc.expires))
			if tc.ok && err != nil {
				t.Fatal(err)
			}
			if !tc.ok && (!errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), tc.expires.Format(time.RFC3339)) || !strings.Contains(err.Error(), "clock-skew allowance 5m0s")) {
				t.Fatalf("expired bundle: %v", err)
			}
		})
	}
	// No expires: a bundle signed before the field existed still loads.
	p := filepath.Join(dir, "noexp")
	b := signBundle(t, "good_a", Manifest{Name: "p", Revision: 1}, s.priv, p)
	if strings.Contains(string(b.ManifestBytes), "expires") {
		t.Fatalf("manifest without expiry mentions it: %s", b.ManifestBytes)
	}
	if err := newRuntime(t, cfg).LoadFile(ctx, p); err != nil {
		t.Fatal(err)
	}
	// A malformed expires is a manifest error (and cannot be signed).
	wasm, _ := os.ReadFile(fixture(t, "good_a"))
	if _, err := SignBundle(wasm, Manifest{Name: "p", Revision: 1, ABIVersion: "1.0", MinEngineVersion: "0.0.0", Expires: "tomorrow"}, s.priv); err == nil || !strings.Contains(err.Error(), `expires "tomorrow"`) {
		t.Fatalf("bad expires: %v", err)
	}
	// VerifyBundle reports expiry too.
	if _, err := VerifyBundle(exp(2, now.Add(-time.Hour)), VerifyOptions{Keys: []ed25519.PublicKey{s.pub}, Limits: NewConfig().bundle, Now: now}); !errors.Is(err, ErrExpired) {
		t.Fatalf("VerifyBundle of an expired bundle: %v", err)
	}
}
