package native

import (
	"math"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sample"
)

// TestFamilyLevers: every adaptive lever on the SYNTHETIC tiny model of
// every family. Q8_0 and Q4_0 files of one shape and seed are the same
// model at two precisions (synth draws the same values for both).
func TestFamilyLevers(t *testing.T) {
	for _, name := range tinyFamilies {
		t.Run(name, func(t *testing.T) {
			q8, q4 := familyModel(t, name, gguf.Q8_0), familyModel(t, name, gguf.Q4_0)
			const steps = 8

			// Weight sets and per-layer precision: every layer and the head
			// on the Q4_0 set is the Q4_0 file alone, bit for bit; one layer
			// on it is neither file.
			t.Run("weight-sets", func(t *testing.T) {
				e, err := Load(q8, Options{Threads: 1, NoVocab: true, ExtraSets: []string{q4}})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				s, err := e.newSession(engine.SessionConfig{NCtx: 128})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				all := make([]int, e.Config().NLayer)
				for i := range all {
					all[i] = 1
				}
				if err := s.SetLayerSets(all); err != nil {
					t.Fatal(err)
				}
				if err := s.SetHeadSet(1); err != nil {
					t.Fatal(err)
				}
				sameLogits(t, "all on q4_0", single(t, q4, steps), trace(t, s, steps, nil))

				m, err := e.newSession(engine.SessionConfig{NCtx: 128})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				if err := m.SetLayerSet(0, 1); err != nil {
					t.Fatal(err)
				}
				mixed, base := trace(t, m, steps, nil), single(t, q8, steps)
				if maxDiff(mixed, base) == 0 || maxDiff(mixed, single(t, q4, steps)) == 0 {
					t.Fatal("layer 0 on q4_0: logits equal one of the files: the selection did nothing")
				}
			})

			// Zero-copy tier swap: swapped to tier 1 before the first token,
			// the session is the Q4_0 file.
			t.Run("tiers", func(t *testing.T) {
				e, err := Load(q8, Options{Threads: 1, NoVocab: true, ExtraSets: []string{q4}, Tiers: true})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				s, err := e.newSession(engine.SessionConfig{NCtx: 128})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if _, err := s.SwapTier(1); err != nil {
					t.Fatal(err)
				}
				sameLogits(t, "tier 1", single(t, q4, steps), trace(t, s, steps, nil))
			})

			// Repack (both engines repacked agree: internal/parity
			// TestParityFamiliesRepacked): released before the first token (SetRepackLayers)
			// the session is the plain file, and repacked again mid-run it
			// changes the logits (other kernels).
			t.Run("repack", func(t *testing.T) {
				e, err := Load(q4, Options{Threads: 1, NoVocab: true, Repack: true})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				if e.Report().RepackBytes() == 0 {
					t.Fatal("nothing repacked")
				}
				s, err := e.newSession(engine.SessionConfig{NCtx: 128})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				got := trace(t, s, steps, func(i int) {
					k := RepackNone
					if i == steps/2 {
						k = e.RepackState().MaxLayers // all
					} else if i != 0 {
						return
					}
					if _, err := s.SetRepackLayers(k); err != nil {
						t.Fatal(err)
					}
				})
				plain := single(t, q4, steps)
				sameLogits(t, "every repacked unit released", plain[:steps/2], got[:steps/2])
				if maxDiff(plain[steps/2:], got[steps/2:]) == 0 {
					t.Fatal("repacked again: logits unchanged")
				}
			})

			// Speculation: greedy identity for skip:1, self:q4_0, ngram and a
			// draft file (the Q4_0 file beside the Q8_0 target).
			t.Run("speculation", func(t *testing.T) {
				e, err := Load(q8, Options{Threads: 1, NoVocab: true, ExtraSets: []string{q4}})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				greedy := sample.Params{TopP: 1, RepeatPenalty: 1}
				prompt := []int32{1, 403, 407, 261, 378, 293, 280, 284}
				const n = 64
				su := specSetup{name: "full"}
				s := specSession(t, e, su)
				want := plainRun(t, s, greedy, prompt, n)
				s.Close()
				de, err := LoadDraft(q4, e) // a draft file sharing the target's KV memfd
				if err != nil {
					t.Fatal(err)
				}
				defer de.Close()
				for _, d := range []DraftSpec{{Kind: DraftSkip, N: 1}, {Kind: DraftSelf, Type: "q4_0"}, {Kind: DraftNgram},
					{Kind: DraftModel, Path: q4, Eng: de}} {
					s := specSession(t, e, su)
					got, st := specRun(t, s, d, greedy, 4, prompt, n)
					s.Close()
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s: token %d: speculative %d, plain %d", d, i, got[i], want[i])
					}
					t.Logf("%s: acceptance %.3f over %d rounds", d, st.Acceptance(), st.Rounds)
				}
			})

			// Windows: a policy window wider than a sliding layer's trained
			// window never widens it (the logits equal the unwindowed
			// session's while the policy evicts nothing), and a narrower one
			// does narrow every layer.
			t.Run("windows", func(t *testing.T) {
				e, err := Load(q8, Options{Threads: 1, NoVocab: true})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				const n = 120 // past the tiny models' trained windows of 48
				run := func(w int) [][]float32 {
					s, err := e.newSession(engine.SessionConfig{NCtx: 512, NBatch: 16})
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					if w > 0 {
						ws := make([]int, e.Config().NLayer)
						for i := range ws {
							ws[i] = w
						}
						if err := s.SetLayerWindows(0, ws); err != nil {
							t.Fatal(err)
						}
					}
					return trace(t, s, n, nil)
				}
				full := run(0)
				sameLogits(t, "policy window 200 on every layer", full, run(200))
				if maxDiff(full[40:], run(24)[40:]) == 0 {
					t.Fatal("policy window 24: logits unchanged")
				}
			})

			// Live KV requantization: F16 → Q8_0 mid-generation keeps the
			// positions and changes the logits from there on, finitely.
			t.Run("kv-requant", func(t *testing.T) {
				e, err := Load(q8, Options{Threads: 1, NoVocab: true})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				s, err := e.newSession(engine.SessionConfig{NCtx: 128})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				got := trace(t, s, steps, func(i int) {
					if i == steps/2 {
						n := s.Len()
						if _, err := s.SetKVType(engine.KVQ8_0); err != nil || s.Len() != n {
							t.Fatalf("SetKVType(q8_0): %v, Len %d want %d", err, s.Len(), n)
						}
					}
				})
				ref := single(t, q8, steps)
				sameLogits(t, "before the switch", ref[:steps/2], got[:steps/2])
				if maxDiff(ref[steps/2:], got[steps/2:]) == 0 {
					t.Fatal("requantized KV: logits unchanged")
				}
			})

			// Threads: a session moved to 2 threads mid-generation emits the
			// same logits.
			t.Run("threads", func(t *testing.T) {
				e, err := Load(q8, Options{Threads: 1, NoVocab: true})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				s, err := e.newSession(engine.SessionConfig{NCtx: 128, Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				got := trace(t, s, steps, func(i int) {
					if i == 2 {
						if err := s.SetThreads(2); err != nil {
							t.Fatal(err)
						}
					}
				})
				sameLogits(t, "2 threads from step 2", single(t, q8, steps), got)
			})
		})
	}
}

// maxDiff is the largest |a−b| over two logit traces (NaN counts as +Inf).
func maxDiff(a, b [][]float32) float64 {
	var m float64
	for i := range min(len(a), len(b)) {
		for j := range a[i] {
			d := math.Abs(float64(a[i][j] - b[i][j]))
			if math.IsNaN(d) {
				return math.Inf(1)
			}
			m = max(m, d)
		}
	}
	return m
}
