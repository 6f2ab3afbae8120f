package native

import (
	"math"
	"os"
	"slices"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
)

// TestRepackLayersLive: repacked weights as a live choice
// (Engine.SetRepackLayers). Releasing every unit gives the pages back
// (mincore) and decodes exactly as the engine loaded without repacking;
// taking them back decodes exactly as the freshly repacked engine did
// (the refill repacks the same bytes); a switch in the middle of a session
// rebuilds its graph, and a session never reads a released page (a stale
// graph would read zeros). Partial counts keep layers from 0 up and the
// head last. SYNTHETIC Q4_0 models (repackModels), one thread.
func TestRepackLayersLive(t *testing.T) {
	requireRepack(t)
	for _, tc := range repackModels {
		t.Run(tc.name, func(t *testing.T) {
			path := synthModel(t, tc.sh, gguf.Q4_0)
			const n = 24
			sc := engine.SessionConfig{NCtx: n + 1, NBatch: 1, Threads: 1, KVType: engine.KVF16, Attention: engine.AttentionFlash}
			load := func(repack bool) *Engine {
				e, err := Load(path, Options{Threads: 1, NoVocab: true, Repack: repack})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { e.Close() })
				return e
			}
			plainEng, eng := load(false), load(true)
			nv := eng.Config().NVocab
			run := func(e *Engine, toks []int32) [][]float32 { return sessionStepLogits(t, e, sc, toks) }
			// The plain engine's greedy tokens are the input everywhere.
			toks := greedyToks(t, plainEng, sc, n)
			plainL, packedL := run(plainEng, toks), run(eng, toks)

			w := eng.sets[0]
			units := tc.sh.NLayer
			if w.Repack.OutputCopy || w.packedOut.Repacked() {
				units++
			}
			st := eng.RepackState()
			if st.Layers != units || st.MaxLayers != units || st.Bytes != w.Repack.Bytes || st.MaxBytes != w.Repack.Bytes {
				t.Fatalf("state after load %+v, want %d units and %d bytes", st, units, w.Repack.Bytes)
			}
			ps := int64(os.Getpagesize())
			res0, err := w.repack.Resident()
			if err != nil {
				t.Fatal(err)
			}
			if res0 < w.Repack.BufferBytes/ps*ps-ps {
				t.Fatalf("repack buffer resident %d bytes of %d after load", res0, w.Repack.BufferBytes)
			}

			// Release everything: pages given back, decoding = plain engine.
			c, err := eng.SetRepackLayers(0)
			if err != nil {
				t.Fatal(err)
			}
			res1, _ := w.repack.Resident()
			t.Logf("release all: %+v; resident %d → %d bytes", c, res0, res1)
			if c.From != units || c.To != 0 || c.Released != units || c.ReleasedBytes != w.Repack.Bytes || c.Restored != 0 {
				t.Errorf("release all: %+v", c)
			}
			if st := eng.RepackState(); st.Layers != 0 || st.Bytes != 0 || st.MaxBytes != w.Repack.Bytes {
				t.Errorf("state after release %+v", st)
			}
			// What stays: the partial pages at each unit's ends.
			if res1 > int64(2*units)*ps {
				t.Errorf("resident after releasing every unit %d bytes, want ≤ %d (two partial pages per unit)", res1, int64(2*units)*ps)
			}
			for i, l := range run(eng, toks) {
				if !slices.Equal(l, plainL[i]) {
					t.Fatalf("released: step %d logits differ from the engine loaded without repacking", i)
				}
			}

			// Take everything back: decoding = freshly repacked engine.
			c, err = eng.SetRepackLayers(units + 5) // clamped
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("restore all: %+v", c)
			if c.To != units || c.Restored != units || c.RestoredBytes != w.Repack.Bytes {
				t.Errorf("restore all: %+v", c)
			}
			for i, l := range run(eng, toks) {
				if !slices.Equal(l, packedL[i]) {
					t.Fatalf("restored: step %d logits differ from the freshly repacked engine", i)
				}
			}

			// In the middle of a session: each switch rebuilds the graph,
			// and decoding on released pages never happens.
			s, err := eng.newSession(sc)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			stepSwitchingUnits(t, eng, s, toks, units, func(i int, l []float32) {
				// Against the plain engine, with TestRepackLogits' bound:
				// a graph on released (zeroed) pages is far outside it.
				var ss, maxD float64
				for j := range l {
					ss += float64(plainL[i][j]) * float64(plainL[i][j])
					maxD = max(maxD, math.Abs(float64(l[j]-plainL[i][j])))
				}
				if rms := math.Sqrt(ss / float64(nv)); !(maxD <= 0.15*rms) {
					t.Fatalf("step %d: max |Δlogit| %.3g against the plain engine, > 15%% of the RMS %.3g", i, maxD, rms)
				}
			})

			// Nothing repacked at load (RepackNone): the buffer is reserved
			// but untouched, decoding is the plain engine's; repacking
			// everything later gives the freshly repacked logits.
			lazy, err := Load(path, Options{Threads: 1, NoVocab: true, Repack: true, RepackLayers: RepackNone})
			if err != nil {
				t.Fatal(err)
			}
			defer lazy.Close()
			lw := lazy.sets[0]
			if st := lazy.RepackState(); st.Layers != 0 || st.MaxLayers != units || st.MaxBytes != w.Repack.Bytes {
				t.Fatalf("RepackNone: state %+v", st)
			}
			// Nothing written: a load that repacked would leave the whole
			// buffer resident. Checked only for a buffer glibc maps on its
			// own (≥ 32 MiB, its largest mmap threshold; a smaller one may
			// reuse heap pages an earlier allocation touched), and with room:
			// a full-suite run found 4.6 MiB of this 32.6 MiB buffer
			// resident (two 2 MiB huge pages and 164 small ones) that
			// nothing of ours had written; alone it reads 0.
			// Residency alone was not enough: one package run among others
			// found the whole buffer resident. So a resident buffer is also
			// compared with the repacked engine's (restored above, same
			// placement): pages the kernel made resident (a huge page around
			// a touched one) or memory reused from an earlier allocation
			// hold zeros or garbage, not this model's repacked weights.
			if res, _ := lw.repack.Resident(); w.Repack.BufferBytes >= 32<<20 && res > w.Repack.BufferBytes/4 {
				a, b := lw.repack.Bytes(), w.repack.Bytes()
				same := 0
				for off := 0; off+4096 <= min(len(a), len(b)); off += 4096 {
					if pb := b[off : off+4096]; slices.Equal(a[off:off+4096], pb) && slices.ContainsFunc(pb, func(x byte) bool { return x != 0 }) {
						same++
					}
				}
				if same > 0 {
					t.Errorf("RepackNone: %d of the buffer's %d bytes resident after load, %d pages of 4 KiB equal to the repacked engine's: written at load", res, w.Repack.BufferBytes, same)
				} else {
					t.Logf("RepackNone: %d of the buffer's %d bytes resident after load, none of it the repacked weights (not written by the load)", res, w.Repack.BufferBytes)
				}
			}
			for i, l := range run(lazy, toks) {
				if !slices.Equal(l, plainL[i]) {
					t.Fatalf("RepackNone: step %d logits differ from the engine loaded without repacking", i)
				}
			}
			if _, err := lazy.SetRepackLayers(units); err != nil {
				t.Fatal(err)
			}
			for i, l := range run(lazy, toks) {
				if !slices.Equal(l, packedL[i]) {
					t.Fatalf("RepackNone, then all: step %d logits differ from the freshly repacked engine", i)
				}
			}
			part, err := Load(path, Options{Threads: 1, NoVocab: true, Repack: true, RepackLayers: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer part.Close()
			if st := part.RepackState(); st.Layers != 2 || st.Bytes != w.units[0].bytes+w.units[1].bytes {
				t.Errorf("RepackLayers 2 at load: state %+v", st)
			}
			if pw := part.sets[0]; !pw.Layers[1].Wq.Repacked() || pw.Layers[2].Wq.Repacked() || pw.Output.Repacked() {
				t.Errorf("RepackLayers 2 at load: layer 1 repacked %v, layer 2 %v, head %v", pw.Layers[1].Wq.Repacked(), pw.Layers[2].Wq.Repacked(), pw.Output.Repacked())
			}

			// Partial: layers from 0 up, the head last.
			for _, k := range []int{1, tc.sh.NLayer} {
				if _, err := eng.SetRepackLayers(k); err != nil {
					t.Fatal(err)
				}
				st := eng.RepackState()
				var want int64
				for u := range k {
					want += w.units[u].bytes
				}
				if st.Layers != k || st.Bytes != want {
					t.Errorf("k = %d: state %+v, want %d bytes", k, st, want)
				}
				for il := range w.Layers {
					if got := w.Layers[il].Wq.Repacked(); got != (il < k) {
						t.Errorf("k = %d: layer %d repacked %v", k, il, got)
					}
				}
				if head := w.Output.Repacked(); head != (k > tc.sh.NLayer) {
					t.Errorf("k = %d: head repacked %v", k, head)
				}
			}
		})
	}
}

// TestRepackColdSets: with two repacked weight sets (Q4_0 and Q4_K of one
// SYNTHETIC model), the set a session does not start on is not repacked at
// load; the advise step repacks a (set, layer) once a session uses it and
// releases the copy of one no session uses any more; decoding then
// matches, bitwise, an engine that repacked everything and never released
// anything (ColdAdvice off).
func TestRepackColdSets(t *testing.T) {
	requireRepack(t)
	q4, q4k := synthModel(t, repackTied, gguf.Q4_0), synthModel(t, repackTied, gguf.Q4_K)
	load := func(cold ColdAdvice) *Engine {
		e, err := Load(q4, Options{Threads: 1, NoVocab: true, Repack: true, ExtraSets: []string{q4k}, ColdAdvice: cold})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	eng, ref := load(ColdDontNeed), load(ColdOff)
	w0, w1 := eng.sets[0], eng.sets[1]
	if len(w0.units) == 0 || len(w1.units) == 0 || w1.Repack.Tensors == 0 {
		t.Fatalf("units: set 0 %d, set 1 %d (%+v)", len(w0.units), len(w1.units), w1.Repack)
	}
	sc := engine.SessionConfig{NCtx: 16, NBatch: 1, Threads: 1, KVType: engine.KVF16, Attention: engine.AttentionFlash}
	s, err := eng.newSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := eng.RepackState(); st.Bytes != w0.Repack.Bytes || st.MaxBytes != w0.Repack.Bytes || st.Layers != len(w0.units) {
		t.Errorf("after load: state %+v, want set 0's %d bytes in use and at most", st, w0.Repack.Bytes)
	}
	for i, u := range w1.units {
		if u.active || !u.cold {
			t.Fatalf("set 1 unit %d after load: active %v, cold %v", i, u.active, u.cold)
		}
	}
	if st := ref.RepackState(); st.Bytes != w0.Repack.Bytes+ref.sets[1].Repack.Bytes {
		t.Errorf("without the advise step both sets are repacked at load: %+v", st)
	}
	r, err := eng.AdviseUnused()
	if err != nil {
		t.Fatal(err)
	}
	if r.Repack.Released+r.Repack.Restored != 0 {
		t.Fatalf("advise with nothing moved: %+v", r.Repack)
	}
	// Layer 0 moves to set 1: its cold unit serves from the mapping until
	// the advise step repacks it again (and releases set 0's layer 0).
	if err := s.SetLayerSet(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Decode([]int32{1}, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	if w1.Layers[0].Wq.Repacked() {
		t.Fatal("a cold unit in use before the advise step reads repacked (released) pages")
	}
	if r, err = eng.AdviseUnused(); err != nil {
		t.Fatal(err)
	}
	if r.Repack.Restored != 1 || r.Repack.Released != 1 || !w1.Layers[0].Wq.Repacked() || w0.Layers[0].Wq.Repacked() {
		t.Fatalf("advise after the move: %+v; set 1 layer 0 repacked %v, set 0 layer 0 %v", r.Repack,
			w1.Layers[0].Wq.Repacked(), w0.Layers[0].Wq.Repacked())
	}
	// A fresh session with layer 0 on set 1 decodes as on the engine that
	// kept every copy.
	decode := func(e *Engine) [][]float32 {
		s, err := e.newSession(sc)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.SetLayerSet(0, 1); err != nil {
			t.Fatal(err)
		}
		return stepLogits(t, s, []int32{1, 7, 42, 99, 3})
	}
	got, want := decode(eng), decode(ref)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("step %d: logits differ from the engine that kept every repacked copy", i)
		}
	}
	// Lowering the count releases warm units too; a cold one is not
	// repacked by raising it.
	if _, err := eng.SetRepackLayers(0); err != nil {
		t.Fatal(err)
	}
	if c, _ := eng.SetRepackLayers(len(w1.units)); c.Restored != len(w0.units) {
		t.Errorf("raising the count again repacked %d units, want %d (set 0 but its cold layer 0, set 1's layer 0)", c.Restored, len(w0.units))
	}
}

// stepLogits decodes toks one at a time on s and returns the logits of
// every step.
func stepLogits(t *testing.T, s *Session, toks []int32) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, tok := range toks {
		if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		l := make([]float32, s.cfg.NVocab)
		if err := s.Logits(0, l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// sessionStepLogits decodes toks one at a time on a new session of e and
// returns the logits of every step.
func sessionStepLogits(t *testing.T, e *Engine, sc engine.SessionConfig, toks []int32) [][]float32 {
	t.Helper()
	s, err := e.newSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return stepLogits(t, s, toks)
}

// stepSwitchingUnits decodes toks one at a time on s, releasing every
// repack unit of eng before step n/3 and restoring all units before
// step 2n/3; each switch must rebuild the graph (a stale one would read
// released pages). check gets each step's logits.
func stepSwitchingUnits(t *testing.T, eng *Engine, s *Session, toks []int32, units int, check func(i int, l []float32)) {
	t.Helper()
	n := len(toks)
	l := make([]float32, eng.Config().NVocab)
	for i, tok := range toks {
		var err error
		switch i {
		case n / 3:
			_, err = eng.SetRepackLayers(0)
		case 2 * n / 3:
			_, err = eng.SetRepackLayers(units)
		}
		if err != nil {
			t.Fatal(err)
		}
		builds := s.stats.GraphBuilds
		if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if (i == n/3 || i == 2*n/3) && s.stats.GraphBuilds != builds+1 {
			t.Fatalf("step %d: the switch did not rebuild the graph (%d → %d builds)", i, builds, s.stats.GraphBuilds)
		}
		if err := s.Logits(0, l); err != nil {
			t.Fatal(err)
		}
		check(i, l)
	}
}
