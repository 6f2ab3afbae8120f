package native

import (
	"errors"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
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
