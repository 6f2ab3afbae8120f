package native

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/synth"
)

// synthSets writes a synthetic model (4 layers of n_embd 1024, n_ff 2816,
// stories260K's 512-token vocabulary) at each type into a temp dir: ~54 MB
// of layers at Q8_0, ~28 MB at Q4_0.
func synthSets(t *testing.T, types ...gguf.Type) []string {
	t.Helper()
	dir := t.TempDir()
	sh := synth.Shape{Name: "cold-test", NEmbd: 1024, NLayer: 4, NHead: 8, NHeadKV: 8, NFF: 2816,
		NCtx: 512, RopeBase: 10000, RMSEps: 1e-5}
	var out []string
	for _, typ := range types {
		p := filepath.Join(dir, typ.String()+".gguf")
		if err := synth.Write(context.Background(), synth.Options{Shape: sh, Type: typ,
			VocabPath: sharedtest.Stories260K(t), Seed: 1, Out: p}, nil); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestColdAdviceReleasesUnusedSet: after decoding on the Q8_0 set and moving
// every layer off it, the advise step takes its pages out of RSS; selecting
// it again warms it and gives the same logits as before.
func TestColdAdviceReleasesUnusedSet(t *testing.T) {
	files := synthSets(t, gguf.Q4_0, gguf.Q8_0)
	e, err := Load(files[0], Options{Threads: 2, NoVocab: true, ExtraSets: files[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.newSession(engine.SessionConfig{NCtx: 64, NBatch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nl := e.Config().NLayer
	on := func(set int) {
		t.Helper()
		sel := make([]int, nl)
		for i := range sel {
			sel[i] = set
		}
		if err := s.SetLayerSets(sel); err != nil {
			t.Fatal(err)
		}
	}
	logits := func() []float32 {
		t.Helper()
		if err := s.Decode([]int32{1, 2, 3}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		l := make([]float32, e.Config().NVocab)
		s.Logits(2, l)
		return l
	}
	on(1)
	want := logits() // warms set 1's layers
	on(0)
	s.Truncate(0)
	logits()
	setBytes := e.Sets()[1].LayerBytes
	rss0 := procKB(t, "/proc/self/smaps_rollup", "Rss")
	r, err := e.AdviseUnused()
	if err != nil {
		t.Fatal(err)
	}
	rss1 := procKB(t, "/proc/self/smaps_rollup", "Rss")
	t.Logf("set 1 (%s, %.1f MiB of layers) advised cold: %d ranges, %.1f MiB; Rss %d → %d kB (−%.1f MiB)",
		e.Sets()[1].Type, float64(setBytes)/(1<<20), r.ColdLayers, float64(r.ColdBytes)/(1<<20), rss0, rss1, float64(rss0-rss1)/1024)
	if r.ColdLayers != nl {
		t.Errorf("%d layers advised cold, want %d", r.ColdLayers, nl)
	}
	if (rss0-rss1)*1024 < setBytes*9/10 {
		t.Fatalf("Rss dropped %d kB, want ≥ 90%% of the unused set's %d kB", rss0-rss1, setBytes/1024)
	}
	// A second advise step has nothing to do.
	if r, _ := e.AdviseUnused(); r.ColdLayers != 0 || r.WarmLayers != 0 {
		t.Errorf("repeated advise: %+v", r)
	}
	// Back on set 1: warmed again, identical results.
	on(1)
	if r, _ := e.AdviseUnused(); r.WarmLayers != nl {
		t.Errorf("%d layers warmed, want %d (set 0's layers go cold: %d)", r.WarmLayers, nl, r.ColdLayers)
	}
	s.Truncate(0)
	sameLogits(t, "set 1 after cold", [][]float32{want}, [][]float32{logits()})
}
