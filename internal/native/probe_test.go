package native

import (
	"math"
	"slices"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
)

// Retrieval probe for decay-merge eviction (issue #29.2) on a real model.
// stories260K cannot be asked a question, so the "fact asked late" is a
// token the text repeats from beyond the window: position p is a recall
// position when the next token toks[p+1] occurs among the evicted
// positions [anchors, p+1-window) and neither in the anchors nor in the
// visible window. There the model can only predict it from what eviction
// kept (nothing for drop, a decayed summary for merge). Per mode the probe
// reports, over recall positions, the mean log-probability of that token
// and how often it is the argmax, and over every position past the window
// the mean KL(full ‖ mode) of the next-token distribution.

type probeStats struct {
	recall       int     // recall positions
	logp, top1   float64 // mean log p(next) and argmax hit rate over them
	klAll, klRec float64 // mean KL(full ‖ this) past the window, at recall positions
}

// probeLogits decodes toks one token at a time through s and returns the
// log-softmax after every token.
func probeLogits(t *testing.T, s *Session, toks []int32, nv int) [][]float64 {
	t.Helper()
	l := make([]float32, nv)
	out := make([][]float64, len(toks))
	for i, tok := range toks {
		if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if err := s.Logits(0, l); err != nil {
			t.Fatal(err)
		}
		out[i] = logSoftmax(l)
	}
	return out
}

func logSoftmax(l []float32) []float64 {
	m := float64(l[kernels.Argmax(l)])
	var z float64
	for _, v := range l {
		z += math.Exp(float64(v) - m)
	}
	out := make([]float64, len(l))
	for i, v := range l {
		out[i] = float64(v) - m - math.Log(z)
	}
	return out
}

// kl is KL(p ‖ q) of two log-distributions.
func kl(lp, lq []float64) float64 {
	var s float64
	for i := range lp {
		s += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return s
}

// recallPositions are the p (predicting toks[p+1]) whose next token is only
// in the evicted span [anchors, p+1-window).
func recallPositions(toks []int32, anchors, window int) []int {
	var ps []int
	for p := anchors + window; p+1 < len(toks); p++ {
		next := toks[p+1]
		lo := p + 1 - window
		if slices.Contains(toks[:anchors], next) || slices.Contains(toks[lo:p+1], next) {
			continue
		}
		if slices.Contains(toks[anchors:lo], next) {
			ps = append(ps, p)
		}
	}
	return ps
}

// probe scores lp (per-position log-softmax of a windowed run) against full.
func probe(toks []int32, full, lp [][]float64, anchors, window int) probeStats {
	var st probeStats
	rec := recallPositions(toks, anchors, window)
	for _, p := range rec {
		next := toks[p+1]
		st.logp += lp[p][next]
		if argmax64(lp[p]) == int(next) {
			st.top1++
		}
		st.klRec += kl(full[p], lp[p])
	}
	st.recall = len(rec)
	if n := float64(len(rec)); n > 0 {
		st.logp, st.top1, st.klRec = st.logp/n, st.top1/n, st.klRec/n
	}
	n := 0
	for p := anchors + window; p+1 < len(toks); p++ {
		st.klAll += kl(full[p], lp[p])
		n++
	}
	st.klAll /= float64(max(n, 1))
	return st
}

func argmax64(v []float64) int {
	b := 0
	for i, x := range v {
		if x > v[b] {
			b = i
		}
	}
	return b
}

// TestRetrievalProbe: the probe's machinery on stories260K and the stories
// text (796 tokens), 4 anchors, windows 16, 32 and 64, drop against merge at
// equal KV memory (the same ring) and against the full KV. The full run
// scored against itself has KL 0 and the recall positions' log p of the
// full run; every window finds recall positions; drop moves the
// distribution away from the full one (KL > 0), and merge gives other
// numbers than drop. The numbers are logged (docs/BENCHMARKS.md); no
// direction is asserted: that is the measurement.
func TestRetrievalProbe(t *testing.T) {
	e, toks := storiesText(t)
	nv := e.w.Config.NVocab
	const anchors = 4
	fs := newTestSession(t, e, engine.SessionConfig{NCtx: 1024, NBatch: 1})
	full := probeLogits(t, fs, toks, nv)
	for _, window := range []int{16, 32, 64} {
		self := probe(toks, full, full, anchors, window)
		if self.klAll != 0 || self.klRec != 0 {
			t.Fatalf("full against itself: KL %g, %g", self.klAll, self.klRec)
		}
		if self.recall == 0 {
			t.Fatalf("window %d: no recall positions in %d tokens", window, len(toks))
		}
		var st [2]probeStats
		for _, mode := range []EvictMode{EvictDrop, EvictMerge} {
			s := newTestSession(t, e, engine.SessionConfig{NCtx: anchors + window + 1, NBatch: 1})
			if err := s.SetWindow(anchors, window); err != nil {
				t.Fatal(err)
			}
			if err := s.SetEvict(mode); err != nil {
				t.Fatal(err)
			}
			st[mode] = probe(toks, full, probeLogits(t, s, toks, nv), anchors, window)
			s.Close()
		}
		t.Logf("window %d (KV %d slots vs 1024), %d recall positions: log p(next) full %.3f drop %.3f merge %.3f; top-1 full %.3f drop %.3f merge %.3f; KL(full‖·) at recall drop %.4f merge %.4f, all past window drop %.4f merge %.4f",
			window, anchors+window+1, self.recall, self.logp, st[0].logp, st[1].logp, self.top1, st[0].top1, st[1].top1,
			st[0].klRec, st[1].klRec, st[0].klAll, st[1].klAll)
		if st[0].klAll <= 0 {
			t.Errorf("window %d: drop has KL %g to the full KV: the window evicted nothing", window, st[0].klAll)
		}
		if st[0] == st[1] {
			t.Errorf("window %d: merge gives the same numbers as drop: not merging", window)
		}
	}
}
