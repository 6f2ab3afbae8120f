package host

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/precision"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestLoadManifest: a manifest file for the model loads with its per-layer
// bits and ranks and its rule; a model without an embedded one gives nil;
// a manifest of another model, another version or with min > max is
// refused with the matching error.
func TestLoadManifest(t *testing.T) {
	q8 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf")
	other := sharedtest.Path(t, "models/derived/stories260K-first4layers.gguf")
	f, err := gguf.Open(q8)
	if err != nil {
		t.Fatal(err)
	}
	good := precision.Manifest{Schema: precision.Schema, Version: precision.Version,
		Model:       precision.Model{Digest: precision.Digest(f), Arch: "llama", Layers: 5},
		Calibration: precision.Calibration{Rule: "kl:0.02,0.005"}}
	for i := range 5 {
		good.Layers = append(good.Layers, precision.Layer{Layer: i, MinBits: 4 + i%2, MaxBits: 8, SensRank: 4 - i})
	}
	dir := t.TempDir()
	write := func(name string, change func(m *precision.Manifest)) string {
		m := good
		m.Layers = append([]precision.Layer(nil), good.Layers...)
		change(&m)
		m.ContentDigest = m.Digest() // what Marshal records, here for invalid manifests too
		b, err := json.Marshal(&m)   // not m.Marshal: that refuses invalid manifests
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	m, err := LoadManifest(q8, write("good.json", func(*precision.Manifest) {}))
	if err != nil {
		t.Fatal(err)
	}
	if m.Rule != "kl:0.02,0.005" || len(m.Layers) != 5 || m.Layers[1] != (ManifestLayer{MinBits: 5, MaxBits: 8, SensRank: 3}) {
		t.Fatalf("loaded %+v", m)
	}
	if m, err := LoadManifest(q8, ""); m != nil || err != nil {
		t.Fatalf("no embedded manifest: got %+v, %v (want nil, nil)", m, err)
	}
	for _, tc := range []struct {
		name, model, file string
		want              error
	}{
		{"other model", other, write("other.json", func(*precision.Manifest) {}), ErrManifestModel},
		{"version", q8, write("v2.json", func(m *precision.Manifest) { m.Version = 2 }), ErrManifestVersion},
		{"min above max", q8, write("minmax.json", func(m *precision.Manifest) { m.Layers[2].MinBits = 40 }), ErrManifestInvalid},
	} {
		if _, err := LoadManifest(tc.model, tc.file); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}
