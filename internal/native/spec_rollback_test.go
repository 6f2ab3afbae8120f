package native

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
)

// TestSpecRollback: at every step two sessions decode a batch of K+1
// tokens (as a verify pass does) that agree on the kept prefix and differ
// in the rejected drafts, then truncate the rejected ones. The logits of
// the next token must be bit-identical (the rejected rows leave no trace;
// the batch shapes are the same, so so is the arithmetic), and every
// position the next query may see — the anchors and the last `window` of
// each layer — must still be held by a slot (no provisional token evicted
// one). With full context, a 4-anchor 24-token window whose ring wraps many
// times, per-layer windows, and F16, Q8_0 and Q4_0 KV.
func TestSpecRollback(t *testing.T) {
	e := loadSpecTarget(t)
	nv := e.Config().NVocab
	type setup struct {
		name    string
		kv      engine.KVType
		anchors int
		windows []int // nil: no window; one entry: every layer
	}
	var setups []setup
	for _, kv := range []engine.KVType{engine.KVF16, engine.KVQ8_0, engine.KVQ4_0} {
		setups = append(setups,
			setup{name: "full/" + string(kv), kv: kv},
			setup{name: "window24+4/" + string(kv), kv: kv, anchors: 4, windows: []int{24}},
			setup{name: "layerwindows/" + string(kv), kv: kv, anchors: 4, windows: []int{12, 40, 24, 24, 60}})
	}
	for _, su := range setups {
		t.Run(su.name, func(t *testing.T) {
			mk := func() *Session {
				s, err := e.newSession(engine.SessionConfig{NCtx: 256, NBatch: 12, KVType: su.kv})
				if err != nil {
					t.Fatal(err)
				}
				switch len(su.windows) {
				case 0:
				case 1:
					err = s.SetWindow(su.anchors, su.windows[0])
				default:
					err = s.SetLayerWindows(su.anchors, su.windows)
				}
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			spec, ref := mk(), mk()
			defer spec.Close()
			defer ref.Close()
			rng := rand.New(rand.NewPCG(7, 7))
			la, lb := make([]float32, nv), make([]float32, nv)
			tok := int32(1)
			total := 200
			if len(su.windows) == 0 {
				total = 120
			}
			for spec.Len() < total {
				k := 1 + rng.IntN(8)    // drafts
				keep := rng.IntN(k + 1) // accepted drafts
				batch := []int32{tok}   // [last, d1..dk]
				for range k {
					batch = append(batch, int32(rng.IntN(nv)))
				}
				n := spec.Len()
				if err := spec.Decode(batch, engine.LogitsAll); err != nil {
					t.Fatal(err)
				}
				if err := spec.Truncate(n + keep + 1); err != nil {
					t.Fatal(err)
				}
				other := append([]int32(nil), batch...)
				for i := keep + 1; i < len(other); i++ {
					other[i] = (other[i] + 1 + int32(rng.IntN(nv-1))) % int32(nv) // a different rejected draft
				}
				if err := ref.Decode(other, engine.LogitsAll); err != nil {
					t.Fatal(err)
				}
				if err := ref.Truncate(n + keep + 1); err != nil {
					t.Fatal(err)
				}
				checkHeld(t, spec)
				// the next token, decoded on both
				tok = int32(rng.IntN(nv))
				if err := spec.Decode([]int32{tok}, engine.LogitsLast); err != nil {
					t.Fatal(err)
				}
				if err := ref.Decode([]int32{tok}, engine.LogitsLast); err != nil {
					t.Fatal(err)
				}
				if err := spec.Logits(0, la); err != nil {
					t.Fatal(err)
				}
				if err := ref.Logits(0, lb); err != nil {
					t.Fatal(err)
				}
				for i := range la {
					if la[i] != lb[i] {
						t.Fatalf("position %d (after keeping %d of %d drafts): logit %d %v, reference %v", spec.Len()-1, keep, k, i, la[i], lb[i])
					}
				}
				tok = int32(rng.IntN(nv))
			}
		})
	}
}

// checkHeld fails unless every ring holds each anchor and each of the last
// `window` positions (all positions without a window).
func checkHeld(t *testing.T, s *Session) {
	t.Helper()
	for r, rg := range s.rings {
		held := map[int32]bool{}
		for _, q := range rg.slotPos[:rg.end] {
			if q >= 0 {
				held[q] = true
			}
		}
		lo := 0
		if rg.window > 0 {
			lo = max(s.anchors, s.n-rg.window)
		}
		for p := 0; p < s.n; p++ {
			if (p < s.anchors || p >= lo) && !held[int32(p)] {
				t.Fatalf("ring %d (window %d): position %d of %d not held after rollback", r, rg.window, p, s.n)
			}
			if p >= s.anchors && p < lo && rg.window == 0 {
				t.Fatalf("unreachable")
			}
		}
		_ = fmt.Sprint()
	}
}
