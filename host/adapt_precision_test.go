package host

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestAdapterManifest: the manifest's bits and ranks and the tok/s target
// reach the Sensors with their presence bits; a manifest with another layer
// count is refused; nothing is present without them.
func TestAdapterManifest(t *testing.T) {
	eng, err := Load(sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf"), LoadOptions{Engine: "native"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	a := &Adapter{eng: eng}
	var s abi.Sensors
	a.prec.fill(&s)
	if s.Has(abi.PresentManifest) || s.Has(abi.PresentTokTarget) {
		t.Fatal("present without a manifest or target")
	}
	m := &Manifest{}
	for i := range 5 {
		m.Layers = append(m.Layers, ManifestLayer{MinBits: 4 + i%2, MaxBits: 8, SensRank: 4 - i})
	}
	if err := a.SetManifest(m); err != nil {
		t.Fatal(err)
	}
	a.SetTokPerSecTarget(25)
	a.prec.fill(&s)
	if !s.Has(abi.PresentManifest|abi.PresentTokTarget) || s.TokPerSecTarget != 25 ||
		s.LayerMinBits[1] != 5 || s.LayerMaxBits[4] != 8 || s.LayerSensRank[0] != 4 || s.LayerSensRank[5] != 0 {
		t.Fatalf("sensors: min %v max %v rank %v target %v", s.LayerMinBits[:6], s.LayerMaxBits[:6], s.LayerSensRank[:6], s.TokPerSecTarget)
	}
	if err := a.SetManifest(&Manifest{Layers: m.Layers[:4]}); err == nil {
		t.Fatal("a 4-layer manifest was accepted for a 5-layer model")
	}
}
