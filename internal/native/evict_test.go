package native

import (
	"math"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestMergeEvictPerplexity: decay-merge eviction against hard drop at equal
// KV memory (same ring, same anchors and window) on a held-out story, on
// stories260K, on its Q8_0 derivative and on its first four layers (a
// different function of the same weights: as a draft it agrees on ~47% of
// tokens). shared/models holds no independent second real model. Merge must change the logits (it is not a no-op), write
// exactly 2 rows (K, V) per layer per evicted position (O(1) per
// eviction), and stay within 10% of full-context perplexity, the bound
// TestWindowPerplexity holds hard drop to.
func TestMergeEvictPerplexity(t *testing.T) {
	for _, model := range []string{"models/stories260K.gguf", "models/derived/stories260K-ff192-Q8_0.gguf", "models/derived/stories260K-first4layers.gguf"} {
		e, err := Load(sharedtest.Path(t, model), Options{NoVocab: true, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		toks := storiesTokens(t, e)
		nv := e.Config().NVocab
		const nb, anchors = 16, 4
		full, err := e.newSession(engine.SessionConfig{NCtx: 1024, NBatch: nb})
		if err != nil {
			t.Fatal(err)
		}
		nf, _ := nll(t, full, toks, nb, nv)
		full.Close()
		for _, window := range []int{16, 32, 64} {
			var ppl [2]float64
			for _, mode := range []EvictMode{EvictDrop, EvictMerge} {
				s, err := e.newSession(engine.SessionConfig{NCtx: anchors + window + nb, NBatch: nb})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.SetWindow(anchors, window); err != nil {
					t.Fatal(err)
				}
				if err := s.SetEvict(mode); err != nil {
					t.Fatal(err)
				}
				nw, ok := nll(t, s, toks, nb, nv)
				if !ok {
					t.Fatalf("%s %s: non-finite logits", model, mode)
				}
				ppl[mode] = math.Exp(nw)
				// The last batch starts at n: positions [anchors, n-window] were folded.
				nLast := (len(toks) - 2) / nb * nb
				want := 0
				if mode == EvictMerge {
					want = 2 * e.Config().NLayer * (nLast - window - anchors + 1)
				}
				if got := s.Stats().MergedRows; got != want {
					t.Errorf("%s window %d %s: %d rows merged, want %d (2 per layer per evicted position)", model, window, mode, got, want)
				}
				s.Close()
			}
			pf := math.Exp(nf)
			t.Logf("%s, %d tokens, %d anchors + window %d (KV slots %d vs 1024): perplexity full %.3f, drop %.3f (×%.3f), merge %.3f (×%.3f)",
				model, len(toks), anchors, window, anchors+window+nb, pf, ppl[0], ppl[0]/pf, ppl[1], ppl[1]/pf)
			if ppl[0] == ppl[1] {
				t.Errorf("%s window %d: merge gives the same perplexity as drop: not merging", model, window)
			}
			if window >= 64 && ppl[1]/pf > 1.10 {
				t.Errorf("%s window %d: merge perplexity %.3f > 1.10 × full %.3f", model, window, ppl[1], pf)
			}
		}
		e.Close()
	}
}
