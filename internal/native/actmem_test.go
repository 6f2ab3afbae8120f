package native

import (
	"slices"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestActivationMemory (issue #29, tensor lifetimes): on a SYNTHETIC model of
// TinyLlama's depth (22 layers), ggml's graph allocator holds the
// activations of a 512-token prefill and of a decode step in a fraction of
// what keeping every intermediate tensor would take (a quarter at most: the
// intermediates of one layer are dead before the next layer's are made), it
// is never above keep-everything, and measuring leaves the session's
// decoding untouched (the next token's logits are bitwise a fresh session's).
func TestActivationMemory(t *testing.T) {
	e, err := Load(synthModel(t, tinyLlamaQuarter, gguf.Q4_0), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sc := engine.SessionConfig{NCtx: 1024, NBatch: 512, Threads: 1}
	newSess := func() *Session {
		s, err := e.newSession(sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := newSess()
	for _, c := range []struct{ nTok, nKV int }{{512, 512}, {1, 513}} {
		m, err := s.ActivationMemory(c.nTok, c.nKV)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("SYNTHETIC %s, %d tokens over %d positions: keep everything %.2f MiB (%d tensors), peak live %.2f MiB, ggml-alloc %.2f MiB (keep-all ÷ alloc %.1f)",
			tinyLlamaQuarter.Name, c.nTok, c.nKV, mib(m.Graph.KeepAll), m.Graph.Tensors, mib(m.Graph.PeakLive), mib(m.Allocated), float64(m.Graph.KeepAll)/float64(m.Allocated))
		if m.Graph.PeakLive <= 0 || m.Graph.PeakLive > m.Graph.KeepAll || m.Allocated > m.Graph.KeepAll || 4*m.Allocated > m.Graph.KeepAll {
			t.Errorf("%d tokens: %+v", c.nTok, m)
		}
	}
	if _, err := s.ActivationMemory(513, 513); err == nil {
		t.Error("a batch above NBatch was measured")
	}
	// Measuring between steps changes nothing.
	prompt := []int32{1, 5, 9, 42, 7}
	logits := func(s *Session, measure bool) []float32 {
		if err := s.Decode(prompt, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if measure {
			if _, err := s.ActivationMemory(1, 6); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Decode([]int32{11}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, e.w.Config.NVocab)
		if err := s.Logits(0, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if a, b := logits(newSess(), true), logits(newSess(), false); !slices.Equal(a, b) {
		t.Error("measuring the activation memory changed the next step's logits")
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// TestLastGraphMemory (issue #29.1, fragmentation over a run): the graph
// measured after a Decode is that Decode's own graph — the same bytes as
// ActivationMemory's graph of the same shape (one token attending the
// padded 256 positions), per ring once windows split the layers — and
// measuring it neither rebuilds nor grows the session's graph.
func TestLastGraphMemory(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.newSession(engine.SessionConfig{NCtx: 512, NBatch: 16, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.LastGraphMemory(); err == nil {
		t.Fatal("measured a graph before any decode")
	}
	if err := s.Decode([]int32{1, 5, 9, 42, 7}, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	if err := s.Decode([]int32{11}, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	got, err := s.LastGraphMemory()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Decode([]int32{12}, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.GraphReuses != 1 {
		t.Errorf("measuring the last graph made the next decode rebuild: %+v", st)
	}
	want, err := s.ActivationMemory(1, defaultKVPad)
	if err != nil {
		t.Fatal(err)
	}
	if got.Graph != want.Graph || got.Allocated != want.Allocated || got.NKV != defaultKVPad || !slices.Equal(got.Rings, []int{defaultKVPad}) ||
		got.Buffer != s.Stats().ActBufBytes || got.Allocated <= 0 {
		t.Errorf("last decode graph %+v, want the graph of 1 token over %d positions %+v", got, defaultKVPad, want)
	}
	// Per-layer windows: one attended length per ring.
	if err := s.SetLayerWindows(4, []int{8, 8, 32, 32, 32}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LastGraphMemory(); err == nil {
		t.Error("measured a graph of the old ring layout after the windows changed")
	}
	if err := s.Decode([]int32{13}, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	w, err := s.LastGraphMemory()
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Rings) != 2 || w.Graph.PeakLive <= 0 || w.Graph.PeakLive == got.Graph.PeakLive {
		t.Errorf("windows 8 and 32: %+v (no window: %+v)", w, got)
	}
}
