package native

import (
	"math"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// tokenizeGreedy is a test-only SentencePiece-style tokenizer: longest match
// over the model's pieces ("▁" for spaces), byte tokens as a fallback. Not
// llama.cpp's tokenization, but both sides of a comparison see the same ids.
func tokenizeGreedy(pieces []string, text string) []int32 {
	idx := map[string]int32{}
	maxLen := 0
	for i, p := range pieces {
		if _, dup := idx[p]; !dup {
			idx[p] = int32(i)
		}
		maxLen = max(maxLen, len(p))
	}
	s := "\u2581" + strings.ReplaceAll(strings.ReplaceAll(text, "\n", " "), " ", "\u2581")
	out := []int32{1} // BOS
	for len(s) > 0 {
		n := min(len(s), maxLen)
		for ; n > 0; n-- {
			if id, ok := idx[s[:n]]; ok {
				out = append(out, id)
				break
			}
		}
		if n == 0 { // byte fallback <0xXX>
			if id, ok := idx["<0x"+strings.ToUpper(hex2(s[0]))+">"]; ok {
				out = append(out, id)
			}
			n = 1
		}
		s = s[n:]
	}
	return out
}

func hex2(b byte) string {
	const d = "0123456789abcdef"
	return string([]byte{d[b>>4], d[b&15]})
}

// nll returns the mean negative log-likelihood of toks[1:] given the prefix,
// decoding in batches of nb with all logits.
func nll(t *testing.T, s *Session, toks []int32, nb, nv int) (float64, bool) {
	t.Helper()
	logits := make([]float32, nv)
	var sum float64
	finite := true
	for i := 0; i+1 < len(toks); i += nb {
		batch := toks[i:min(i+nb, len(toks)-1)]
		if err := s.Decode(batch, engine.LogitsAll); err != nil {
			t.Fatal(err)
		}
		for k := range batch {
			if err := s.Logits(k, logits); err != nil {
				t.Fatal(err)
			}
			lse := sample.LogSumExp(logits)
			next := toks[i+k+1]
			sum += lse - float64(logits[next])
			for _, v := range logits {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					finite = false
				}
			}
		}
	}
	return sum / float64(len(toks)-1), finite
}

// TestWindowPerplexity: with 4 anchors and a 64-token window (the ring wraps
// several times over a ~450-token story), perplexity stays within 10% of
// full context and no logit is NaN.
func TestWindowPerplexity(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	toks := storiesTokens(t, e)
	nv := e.Config().NVocab
	const nb, anchors, window = 16, 4, 64
	full, err := e.newSession(engine.SessionConfig{NCtx: 1024, NBatch: nb})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	win, err := e.newSession(engine.SessionConfig{NCtx: anchors + window + nb, NBatch: nb})
	if err != nil {
		t.Fatal(err)
	}
	defer win.Close()
	if err := win.SetWindow(anchors, window); err != nil {
		t.Fatal(err)
	}
	nf, okf := nll(t, full, toks, nb, nv)
	nw, okw := nll(t, win, toks, nb, nv)
	pf, pw := math.Exp(nf), math.Exp(nw)
	t.Logf("%d tokens: perplexity full %.3f, window %d + %d anchors %.3f (ratio %.3f); KV slots %d vs %d",
		len(toks), pf, window, anchors, pw, pw/pf, win.nCtx, full.nCtx)
	if len(toks) < 3*window {
		t.Fatalf("story of %d tokens does not go well past the window", len(toks))
	}
	if !okf || !okw {
		t.Fatal("non-finite logits")
	}
	if pw/pf > 1.10 {
		t.Errorf("windowed perplexity %.3f > 1.10 × full %.3f", pw, pf)
	}
	if win.Len() != len(toks)-1 {
		t.Fatalf("Len %d", win.Len())
	}
}

// TestWindowTruncateAndSlots: the ring rolls back over truncated tokens, and
// a windowed session gives the same logits as a full one while the sequence
// still fits in the window.
func TestWindowTruncateAndSlots(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	nv := e.Config().NVocab
	full, _ := e.newSession(engine.SessionConfig{NCtx: 128, NBatch: 10})
	defer full.Close()
	win, _ := e.newSession(engine.SessionConfig{NCtx: 2 + 16 + 10, NBatch: 10})
	defer win.Close()
	if err := win.SetWindow(2, 16); err != nil {
		t.Fatal(err)
	}
	toks := []int32{1, 403, 407, 261, 378, 414, 270, 262, 300, 301}
	a, b := make([]float32, nv), make([]float32, nv)
	for _, s := range []*Session{full, win} {
		if err := s.Decode(toks, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		s.Truncate(6) // drop 4
		if err := s.Decode(toks[6:9], engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
	}
	full.Logits(2, a)
	win.Logits(2, b)
	for j := range a {
		if math.Abs(float64(a[j]-b[j])) > 1e-4 {
			t.Fatalf("logit %d: full %v, windowed %v", j, a[j], b[j])
		}
	}
	if err := win.SetWindow(2, 30); err == nil {
		t.Fatal("window larger than the ring accepted")
	}
	if err := win.SetWindow(3, 16); err == nil {
		t.Fatal("anchors changed after they were filled")
	}
}

// TestWindowShrinkReleasesMemory: shrinking the window from 2048 to 256
// tokens MADV_DONTNEEDs the freed KV pages; RSS and PSS drop by about that
// much (synthetic model: 4 layers, 256-wide F16 K/V rows, 8 MiB arena).
func TestWindowShrinkReleasesMemory(t *testing.T) {
	sh := defaultTiny()
	sh.nEmbd, sh.nHead, sh.nHeadKV, sh.nLay, sh.nCtx = 256, 4, 4, 4, 2048
	e, err := Load(writeTiny(t, sh), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const nb = 64
	s, err := e.newSession(engine.SessionConfig{NCtx: 2048, NBatch: nb})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetWindow(4, 2048-4-nb); err != nil {
		t.Fatal(err)
	}
	batch := make([]int32, nb)
	for i := range batch {
		batch[i] = int32(i % sh.nVoc)
	}
	for s.Len() < 2048+nb { // fill the arena and wrap the ring once
		if err := s.Decode(batch, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
	}
	logits := make([]float32, sh.nVoc)
	// Remember the V rows (last layer) of the positions the shrink keeps.
	rowOf := func() map[int32]string {
		m := map[int32]string{}
		reg, rk := s.kv.region(sh.nLay-1, true), int(s.kv.RowK)
		for j, q := range s.rings[0].slotPos {
			if q >= int32(s.Len()-256) {
				m[q] = string(reg[j*rk : (j+1)*rk])
			}
		}
		return m
	}
	before := rowOf()
	rss0 := procKB(t, "/proc/self/status", "VmRSS")
	pss0 := procKB(t, "/proc/self/smaps_rollup", "Pss")
	if err := s.SetWindow(4, 256); err != nil {
		t.Fatal(err)
	}
	rss1 := procKB(t, "/proc/self/status", "VmRSS")
	pss1 := procKB(t, "/proc/self/smaps_rollup", "Pss")
	freedKB := int64(2048-(4+256+nb)) * s.kv.RowK * 2 * int64(sh.nLay) / 1024
	t.Logf("shrink 2048 → 256: RSS %d → %d kB, PSS %d → %d kB (expected ≈ %d kB freed)", rss0, rss1, pss0, pss1, freedKB)
	if rss0-rss1 < freedKB*8/10 || pss0-pss1 < freedKB*8/10 {
		t.Fatalf("RSS dropped %d kB, PSS %d kB; want ≈ %d kB", rss0-rss1, pss0-pss1, freedKB)
	}
	after := rowOf()
	if len(before) != 256 || len(after) != 256 {
		t.Fatalf("kept %d positions before, %d after; want 256", len(before), len(after))
	}
	for q, r := range before {
		if after[q] != r {
			t.Fatalf("position %d: KV row changed by the compaction", q)
		}
	}
	// Decoding continues over the compacted window.
	for range 8 {
		if err := s.Decode(batch[:8], engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		s.Logits(7, logits)
		for _, v := range logits {
			if math.IsNaN(float64(v)) {
				t.Fatal("NaN after shrink")
			}
		}
	}
}
