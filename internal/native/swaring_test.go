package native

import (
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
)

// writtenRows counts the KV slots of layer il (K region) holding any
// nonzero byte: the slots the session wrote. The memfd reads zero where
// nothing was written.
func writtenRows(s *Session, il int) int {
	reg := s.kv.region(il, false)
	row := int(s.kv.RowK)
	n := 0
	for j := 0; j < s.kv.NSlots; j++ {
		for _, b := range reg[j*row : (j+1)*row] {
			if b != 0 {
				n++
				break
			}
		}
	}
	return n
}

// TestTrainedSlidingRings: on the SYNTHETIC Gemma 2/3 tiny models the
// sliding layers keep only their trained window (a ring of
// sliding_window + n_batch slots, padded to 256 as llama.cpp pads its SWA
// cache) while the global layers keep the whole
// context; the KV slots written per layer are what those windows imply,
// a wider user window never widens a sliding layer, turning the window
// off returns to the trained rings, and a truncate the sliding ring can
// no longer serve is refused. Logit parity with llama.cpp's SWA cache is
// TestParityFamilies (internal/parity).
func TestTrainedSlidingRings(t *testing.T) {
	for _, name := range []string{"gemma2-tiny", "gemma3-tiny"} {
		t.Run(name, func(t *testing.T) {
			e, err := Load(familyModel(t, name, gguf.Q8_0), Options{Threads: 1, NoVocab: true})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			cfg := e.Config()
			const nCtx, nBatch, steps = 768, 8, 400
			if cfg.NSWA <= 0 || s0(cfg.NSWA+nBatch) >= steps {
				t.Fatalf("sliding window %d: the test wants one well inside %d steps", cfg.NSWA, steps)
			}
			s, err := e.newSession(engine.SessionConfig{NCtx: nCtx, NBatch: nBatch})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			nSWA := 0
			for il, w := range s.LayerWindows() {
				want := 0
				if cfg.IsSWA(il) {
					want, nSWA = cfg.NSWA, nSWA+1
				}
				if w != want {
					t.Fatalf("layer %d: window %d at creation, want %d", il, w, want)
				}
			}
			if nSWA == 0 || nSWA == cfg.NLayer {
				t.Fatalf("%d sliding layers of %d: want both kinds", nSWA, cfg.NLayer)
			}
			tok := int32(1)
			for i := range steps {
				if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				tok = int32(2 + (i*37)%400)
			}
			ring := s0(cfg.NSWA + nBatch)
			var live int64
			for il := range cfg.NLayer {
				want := steps
				if cfg.IsSWA(il) {
					want = ring
				}
				live += int64(want) * 2 * s.kv.RowK
				if got := writtenRows(s, il); got != want {
					t.Errorf("layer %d (sliding %v): %d KV slots written after %d steps, want %d", il, cfg.IsSWA(il), got, steps, want)
				}
			}
			// Live bytes: the global layers at the context, the sliding
			// ones at their ring.
			if want := live + int64(cfg.NLayer-nSWA)*int64(nCtx-steps)*2*s.kv.RowK; s.KVLiveBytes() != want {
				t.Errorf("KVLiveBytes %d, want %d", s.KVLiveBytes(), want)
			}
			full := int64(cfg.NLayer) * nCtx * 2 * s.kv.RowK
			t.Logf("SYNTHETIC %s: KV %d of %d bytes live (sliding window %d, %d of %d layers sliding)", name, s.KVLiveBytes(), full, cfg.NSWA, nSWA, cfg.NLayer)

			// Truncating further back than the ring's spare slots
			// would need positions the sliding layers overwrote.
			if err := s.Truncate(steps - (ring - cfg.NSWA) - 1); err == nil {
				t.Error("truncate past what the sliding ring holds: no error")
			}
			if err := s.Truncate(steps - (ring - cfg.NSWA)); err != nil {
				t.Errorf("truncate within the ring's spare slots: %v", err)
			}

			// A user window wider than the trained one: the sliding layers
			// keep their trained window, the global ones take the user's.
			u, err := e.newSession(engine.SessionConfig{NCtx: nCtx, NBatch: nBatch})
			if err != nil {
				t.Fatal(err)
			}
			defer u.Close()
			wide := 2 * cfg.NSWA
			if err := u.SetWindow(0, wide); err != nil {
				t.Fatal(err)
			}
			for il, w := range u.LayerWindows() {
				want := wide
				if cfg.IsSWA(il) {
					want = cfg.NSWA
				}
				if w != want {
					t.Fatalf("layer %d: window %d under SetWindow(0, %d), want %d", il, w, wide, want)
				}
			}
			if err := u.SetWindow(0, 0); err != nil {
				t.Fatal(err)
			}
			for il, w := range u.LayerWindows() {
				if want := map[bool]int{true: cfg.NSWA}[cfg.IsSWA(il)]; w != want {
					t.Fatalf("layer %d: window %d after SetWindow(0, 0), want trained %d", il, w, want)
				}
			}
		})
	}
}

// s0 rounds n up to the KV padding (256).
func s0(n int) int { return (n + 255) / 256 * 256 }
