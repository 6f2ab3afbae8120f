package precision

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testManifest() *Manifest {
	m := &Manifest{Schema: Schema, Version: Version, Model: Model{Digest: "sha256:abc", Arch: "llama", Layers: 2},
		Sets: []Set{{File: "f32.gguf", Bits: 32, BitsPerWeight: 32, Base: true}, {File: "q4.gguf", Bits: 4, BitsPerWeight: 4.5}}}
	for i := range 2 {
		m.Layers = append(m.Layers, Layer{Layer: i, MinBits: 4, MaxBits: 32, SensRank: 1 - i,
			Precisions: []Precision{{Bits: 4, Set: "q4.gguf", KL: 0.01 * float64(i+1)}}})
	}
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	m := testManifest()
	p := filepath.Join(t.TempDir(), "m.json")
	if err := m.Write(p); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Layers[1].Precisions[0].KL != 0.02 || got.Model.Digest != m.Model.Digest {
		t.Fatalf("round trip: %+v", got)
	}
	if err := got.Check("sha256:abc", 2); err != nil {
		t.Fatal(err)
	}
}

func TestManifestErrors(t *testing.T) {
	tests := []struct {
		name   string
		change func(m *Manifest)
		want   error
		msg    string
	}{
		{"schema", func(m *Manifest) { m.Schema = "other" }, ErrSchema, `"other"`},
		{"version", func(m *Manifest) { m.Version = 2 }, ErrVersion, "2"},
		{"min above max", func(m *Manifest) { m.Layers[1].MinBits = 33 }, ErrInvalid, "min_bits 33 above max_bits 32"},
		{"layer count", func(m *Manifest) { m.Layers = m.Layers[:1] }, ErrInvalid, "1 layer entries"},
		{"too many layers", func(m *Manifest) { m.Model.Layers = 129 }, ErrTooLarge, "129"},
		{"duplicate rank", func(m *Manifest) { m.Layers[1].SensRank = 1 }, ErrInvalid, "sens_rank 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := testManifest()
			tc.change(m)
			dir := t.TempDir()
			p := filepath.Join(dir, "m.json")
			err := m.Write(p)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Write: %v, want %v containing %q", err, tc.want, tc.msg)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("a refused manifest left %d file(s)", len(ents))
			}
			// The same refusal on reading one written by someone else.
			b, _ := jsonOf(m)
			if _, err := Parse(b); !errors.Is(err, tc.want) {
				t.Fatalf("Parse: %v, want %v", err, tc.want)
			}
		})
	}
	if err := testManifest().Check("sha256:def", 2); !errors.Is(err, ErrModel) {
		t.Fatalf("another model: %v", err)
	}
	if _, err := Parse([]byte(`{"schema":"` + Schema + `","version":1,"bogus":1}`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestRule(t *testing.T) {
	ps := func(k4, k5, k8 float64) []Precision {
		return []Precision{{Bits: 8, KL: k8, PPLChangePct: k8 * 10}, {Bits: 5, KL: k5, PPLChangePct: k5 * 10}, {Bits: 4, KL: k4, PPLChangePct: k4 * 10}}
	}
	tests := []struct {
		rule string
		ps   []Precision
		want int
	}{
		{"", ps(0.01, 0.005, 0.001), 4},
		{"", ps(0.03, 0.04, 0.001), 5},
		{"", ps(0.03, 0.06, 0.001), 8},
		{"kl:0.05,0.1", ps(0.03, 0.06, 0.001), 4},
		{"ppl:0.5", ps(0.03, 0.04, 0.001), 4}, // ppl 0.3, 0.4, 0.01 %
		{"ppl:0.5", ps(0.06, 0.04, 0.001), 5}, // ppl 0.6, 0.4, 0.01 %
		{"ppl:0.05", ps(0.03, 0.04, 0.001), 8},
		{"ppl:0.001", ps(0.03, 0.04, 0.001), 32}, // nothing allowed: the base
	}
	for _, tc := range tests {
		r, err := ParseRule(tc.rule)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.MinBits(tc.ps, 32); got != tc.want {
			t.Errorf("%s on %+v: min_bits %d, want %d", r, tc.ps, got, tc.want)
		}
	}
	for _, bad := range []string{"kl:0.05", "kl:0.1,0.05", "ppl:-1", "ppl:x", "foo:1"} {
		if _, err := ParseRule(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseRule(%q): %v", bad, err)
		}
	}
	if got := Ranks([]float64{0.1, 0.3, 0.2}); got[0] != 2 || got[1] != 0 || got[2] != 1 {
		t.Fatalf("Ranks: %v", got)
	}
}

// jsonOf encodes m without validating it.
func jsonOf(m *Manifest) ([]byte, error) { return json.Marshal(m) }

// TestManifestHandEdit: a manifest edited after it was written (min_bits
// raised, a KL changed, the digest removed) is refused; a negative KL is
// refused even when re-digested; an intended edit is accepted once
// re-digested (Marshal records the digest of the new content).
func TestManifestHandEdit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.json")
	if err := testManifest().Write(p); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(p)
	edit := func(from, to string) []byte {
		if !strings.Contains(string(orig), from) {
			t.Fatalf("%q not in the manifest", from)
		}
		return []byte(strings.Replace(string(orig), from, to, 1))
	}
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"min_bits 4 → 8", edit(`"min_bits": 4`, `"min_bits": 8`), ErrDigest},
		{"KL changed", edit(`"kl": 0.01`, `"kl": 0.001`), ErrDigest},
		{"negative KL", edit(`"kl": 0.01`, `"kl": -0.01`), ErrInvalid},
		{"digest removed", []byte(strings.Replace(string(orig), `"content_digest": "sha256:`, `"content_digest": "x`, 1)), ErrDigest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.data); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	var m Manifest
	if err := json.Unmarshal(edit(`"min_bits": 4`, `"min_bits": 8`), &m); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Marshal(); err != nil { // re-digest
		t.Fatal(err)
	}
	b, _ := m.Marshal()
	if got, err := Parse(b); err != nil || got.Layers[0].MinBits != 8 {
		t.Fatalf("re-digested: %v, %v", got, err)
	}
	if _, err := Parse(orig); err != nil {
		t.Fatalf("untouched: %v", err)
	}
}
