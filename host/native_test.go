package host

import (
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestAdapterLayerBits: LayerBits decisions reach the native engine's
// per-layer weight sets, each layer on the set of closest precision.
func TestAdapterLayerBits(t *testing.T) {
	dir := "models/derived/stories260K-ff192-"
	base := sharedtest.Path(t, dir+"f32.gguf")
	eng, err := Load(base, LoadOptions{Engine: "native",
		LayerSets: []string{sharedtest.Path(t, dir+"Q8_0.gguf"), sharedtest.Path(t, dir+"Q4_0.gguf")}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sess, err := eng.NewSession(SessionConfig{NCtx: 64, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sess.(LayerSetter); !ok {
		t.Fatal("no LayerSetter with layer sets")
	}
	defer sess.Close()
	a := &Adapter{eng: eng, sess: sess, ctx: 64}
	ls := sess.(LayerSetter)
	tests := []struct {
		bits     []uint8 // decision, layers 0..4 (0 = leave)
		wantSets []int
		wantBits []uint8
	}{
		{[]uint8{4, 8, 24, 0, 2}, []int{2, 1, 0, 0, 2}, []uint8{4, 8, 32, 32, 4}},
		{[]uint8{0, 6, 0, 5, 16}, []int{2, 1, 0, 2, 1}, []uint8{4, 8, 32, 4, 8}}, // 6: tie 4/8 → 8; 16 → 8
		{[]uint8{0, 0, 0, 0, 0}, []int{2, 1, 0, 2, 1}, []uint8{4, 8, 32, 4, 8}},
	}
	toks := []int32{1, 2, 3}
	for i, tc := range tests {
		var d abi.Decision
		copy(d.LayerBits[:], tc.bits)
		d.LayerBits[7] = 8 // past the model's 5 layers: dropped
		if err := a.apply(i, d); err != nil {
			t.Fatal(err)
		}
		if got := ls.LayerSets(); !slices.Equal(got, tc.wantSets) {
			t.Errorf("decision %v: sets %v, want %v", tc.bits, got, tc.wantSets)
		}
		cur := a.Current()
		if got := cur.LayerBits[:8]; !slices.Equal(got, append(tc.wantBits, 0, 0, 0)) {
			t.Errorf("decision %v: current bits %v, want %v", tc.bits, got, tc.wantBits)
		}
		n := sess.Len()
		if err := sess.Decode(toks, LogitsLast); err != nil {
			t.Fatal(err)
		}
		if sess.Len() != n+len(toks) {
			t.Fatalf("Len %d after decode, want %d", sess.Len(), n+len(toks))
		}
		toks = toks[:1]
	}
}

// TestLoadLayerSetsNeedsNative: layer sets on the llamacpp engine are refused.
func TestLoadLayerSetsNeedsNative(t *testing.T) {
	m := sharedtest.Stories260K(t)
	_, err := Load(m, LoadOptions{Engine: "llamacpp", LayerSets: []string{m}})
	if err == nil || !strings.Contains(err.Error(), "native engine") {
		t.Fatalf("llamacpp with layer sets: %v", err)
	}
}
