package native

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestContextShift (#25 point 3): a windowed session decodes past its
// context. Positions keep their absolute values (no renumbering, no K
// re-rotation, RATIONALE.md): a session of 64 slots and one of 1024 with
// the same anchors, window and batch (so the same ring of 4+24+16 slots)
// give bit-identical logits for 400 positions, and each ring slot's layer-0
// K row is the one a full session wrote at the absolute position it holds. A prompt longer than the ring has room for
// beside its window is decoded in batches that fit.
// Without a window the small session stops at its context.
func TestContextShift(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	nv := e.Config().NVocab
	const anchors, window, nb = 4, 24, 16
	mk := func(nCtx int, win bool) *Session {
		s, err := e.newSession(engine.SessionConfig{NCtx: nCtx, NBatch: nb})
		if err != nil {
			t.Fatal(err)
		}
		if win {
			if err := s.SetWindow(anchors, window); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	small, big, full := mk(64, true), mk(1024, true), mk(1024, false)
	defer small.Close()
	defer big.Close()
	defer full.Close()
	if small.rings[0].end != big.rings[0].end {
		t.Fatalf("ring ends %d and %d differ", small.rings[0].end, big.rings[0].end)
	}
	ls, lb := make([]float32, nv), make([]float32, nv)
	tok := int32(1)
	for small.Len() < 400 {
		for _, s := range []*Session{small, big} {
			if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
				t.Fatalf("position %d: %v", s.Len(), err)
			}
		}
		if err := full.Decode([]int32{tok}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if err := small.Logits(0, ls); err != nil {
			t.Fatal(err)
		}
		if err := big.Logits(0, lb); err != nil {
			t.Fatal(err)
		}
		for j := range ls {
			if ls[j] != lb[j] {
				t.Fatalf("position %d: logit %d %v in 64 slots, %v in 1024", small.Len()-1, j, ls[j], lb[j])
			}
		}
		tok = argmax(ls)
	}

	// Layer 0's K row depends only on the token and its position (RoPE):
	// each ring slot's row equals the row the full session (slot =
	// position) wrote for the position the slot holds, so the ring rotated
	// it by the absolute position, past the 64 slots.
	row := int(small.kv.RowK)
	kr, kf := small.kv.region(0, false), full.kv.region(0, false)
	past := 0
	for j, q := range small.rings[0].slotPos[:small.rings[0].end] {
		if q < 0 {
			continue
		}
		if string(kr[j*row:(j+1)*row]) != string(kf[int(q)*row:(int(q)+1)*row]) {
			t.Fatalf("slot %d: layer 0 K of position %d differs from the full session's", j, q)
		}
		if q >= 64 {
			past++
		}
	}
	if past < window {
		t.Fatalf("%d slots hold positions past the context of 64", past)
	}

	// A 40-token batch: larger than the batch size and than the room of
	// 16 slots the ring has beside its window. Decode splits it; Logits
	// takes the index in the whole batch; the result is the big session's
	// decoded in the same batches.
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(3 + (i*37)%(nv-3))
	}
	small2, big2 := mk(64, true), mk(1024, true)
	defer small2.Close()
	defer big2.Close()
	if err := small2.Decode(prompt, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	if err := small2.Logits(len(prompt)-1, ls); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(prompt); i += nb {
		if err := big2.decode(nil, prompt[i:min(len(prompt), i+nb)], engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
	}
	if err := big2.Logits(big2.lastN-1, lb); err != nil {
		t.Fatal(err)
	}
	for j := range ls {
		if ls[j] != lb[j] {
			t.Fatalf("split batch: logit %d %v, %v in the same batches by hand", j, ls[j], lb[j])
		}
	}
	if small2.Len() != len(prompt) {
		t.Fatalf("Len %d after a %d-token prompt", small2.Len(), len(prompt))
	}

	// No window: the context is the limit.
	plain := mk(64, false)
	defer plain.Close()
	for plain.Len() < 64 {
		if err := plain.Decode([]int32{1}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
	}
	if err := plain.Decode([]int32{1}, engine.LogitsLast); !errors.Is(err, engine.ErrContextFull) {
		t.Fatalf("decode past the context without a window: %v, want context full", err)
	}
}

func argmax(v []float32) int32 {
	b := 0
	for i := range v {
		if v[i] > v[b] {
			b = i
		}
	}
	return int32(b)
}

// TestContextShiftPerplexity measures what a shifted context costs
// (docs/BENCHMARKS.md): stories260K over text/stories.txt (796 tokens),
// the perplexity of
//   - full: one session holding every token (1024 slots);
//   - ring: a 64-slot session with 4 anchors and a 44-token window
//     decoding the whole text, past its context (absolute positions);
//   - renumbered: for each token, a fresh 64-slot session given the same
//     visible tokens (the 4 anchors and the last 44) at positions 0..47:
//     what a context shift that renumbers positions computes (llama.cpp's);
//   - chunks: the text cut into 64-token chunks, each a fresh 64-slot
//     session (llama-perplexity's fresh contexts of the same size).
//
// The ring must stay within 10% of full (as TestWindowPerplexity's) and
// below the chunks' (it always sees at least 44 tokens back; a chunk's
// first tokens see almost none).
func TestContextShiftPerplexity(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	toks := storiesTokens(t, e)
	nv := e.Config().NVocab
	const nCtx, nb, anchors = 64, 16, 4
	const window = nCtx - anchors - nb // 44: the ring fills the 64 slots
	mk := func(n, batch int) *Session {
		s, err := e.newSession(engine.SessionConfig{NCtx: n, NBatch: batch})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	full := mk(1024, nb)
	defer full.Close()
	nf, okf := nll(t, full, toks, nb, nv)
	ring := mk(nCtx, nb)
	defer ring.Close()
	if err := ring.SetWindow(anchors, window); err != nil {
		t.Fatal(err)
	}
	nr, okr := nll(t, ring, toks, nb, nv)

	logits := make([]float32, nv)
	lossAt := func(s *Session, ctx []int32, next int32) float64 {
		if err := s.Decode(ctx, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if err := s.Logits(len(ctx)-1, logits); err != nil {
			t.Fatal(err)
		}
		return sample.LogSumExp(logits) - float64(logits[next])
	}
	fresh := mk(nCtx, anchors+window) // one batch per prediction
	defer fresh.Close()
	var sumRen float64
	for p := 0; p+1 < len(toks); p++ { // predict toks[p+1] from what the ring shows at p
		ctx := toks[:p+1]
		if p+1 > anchors+window {
			ctx = append(slices.Clone(toks[:anchors]), toks[p+1-window:p+1]...)
		}
		if err := fresh.Truncate(0); err != nil {
			t.Fatal(err)
		}
		sumRen += lossAt(fresh, ctx, toks[p+1])
	}
	nRen := sumRen / float64(len(toks)-1)
	var sumChunk float64
	cnt := 0
	for c := 0; c+1 < len(toks); c += nCtx {
		chunk := toks[c:min(len(toks), c+nCtx)]
		if len(chunk) < 2 {
			break
		}
		if err := fresh.Truncate(0); err != nil {
			t.Fatal(err)
		}
		n, _ := nll(t, fresh, chunk, nb, nv)
		sumChunk += n * float64(len(chunk)-1)
		cnt += len(chunk) - 1
	}
	nChunk := sumChunk / float64(cnt)
	pf, pr, pRen, pChunk := math.Exp(nf), math.Exp(nr), math.Exp(nRen), math.Exp(nChunk)
	t.Logf("%d tokens: perplexity full %.3f; ring (64 slots: %d anchors + window %d, absolute positions) %.3f; renumbered positions, same tokens seen %.3f; fresh 64-token chunks %.3f",
		len(toks), pf, anchors, window, pr, pRen, pChunk)
	if !okf || !okr {
		t.Fatal("non-finite logits")
	}
	if pr/pf > 1.10 {
		t.Errorf("ring perplexity %.3f > 1.10 × full %.3f", pr, pf)
	}
	if pr >= pChunk {
		t.Errorf("ring perplexity %.3f ≥ fresh chunks' %.3f", pr, pChunk)
	}
}
