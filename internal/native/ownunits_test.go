package native

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// ownResident is how many bytes of w's q4x4 copies are resident (mincore).
func ownResident(t *testing.T, w *Weights) int64 {
	t.Helper()
	if len(w.ownMem) == 0 {
		return 0
	}
	ps := os.Getpagesize()
	vec := make([]byte, (len(w.ownMem)+ps-1)/ps)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&w.ownMem[0])), uintptr(len(w.ownMem)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	var n int64
	for _, v := range vec {
		n += int64(v&1) * int64(ps)
	}
	return n
}

// ownHeld reports per unit of w whether the engine's lookup has its q4x4
// copies (all of them, or none: anything else fails the test).
func ownHeld(t *testing.T, e *Engine, w *Weights) []bool {
	t.Helper()
	held := make([]bool, len(w.units))
	for i, u := range w.units {
		n := 0
		for _, o := range u.own {
			if e.own.lookup(o.x) != nil {
				n++
			}
		}
		if n != 0 && n != len(u.own) {
			t.Fatalf("unit %d: %d of its %d q4x4 copies in the lookup", i, n, len(u.own))
		}
		held[i] = n > 0
	}
	return held
}

// greedyToks decodes n greedy tokens from token 1 on a new session of e.
func greedyToks(t *testing.T, e *Engine, sc engine.SessionConfig, n int) []int32 {
	t.Helper()
	s, err := e.newSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toks := []int32{1}
	l := make([]float32, e.Config().NVocab)
	for len(toks) < n {
		if err := s.Decode(toks[len(toks)-1:], engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if err := s.Logits(0, l); err != nil {
			t.Fatal(err)
		}
		toks = append(toks, kernels.Argmax(l))
	}
	return toks
}

// TestOwnLayoutUnitsLive: with Kernels "edgellm" on a CPU that runs q4x4,
// the q4x4 copies are repack units (ownlayout.go). With Repack they take
// every plain Q4_0 matrix (ggml's buffer none), all units at load; without
// Repack too, and releasable alike. SetRepackLayers releases units (their
// pages given back: mincore; out of the lookup), keeps layers from 0 up,
// and takes them back (resident again, read by the graph: zeroed, the
// logits change), live in a session (each switch rebuilds its graph); the
// reported bytes follow. Every step's logits stay bitwise those of the
// engine that never switched (our q4x4 and plain kernels agree bitwise on
// decode steps), so greedy tokens are unchanged, and a step allocates
// nothing after the switches. Options.RepackLayers copies the first units
// at load and leaves the others unwritten. stories260K Q4_0 and a SYNTHETIC 1B-shape
// quarter-width Q4_0 model, one thread.
func TestOwnLayoutUnitsLive(t *testing.T) {
	if !kernels.EdgellmQ4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	for _, path := range []string{
		filepath.Join(sharedtest.Dir(), "models", "derived", "stories260K-ff192-Q4_0.gguf"),
		synthModel(t, l1bQuarter, gguf.Q4_0),
	} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			const n = 24
			sc := engine.SessionConfig{NCtx: n + 16, NBatch: 1, Threads: 1} // room for the allocation check
			load := func(repack bool) *Engine {
				e, err := Load(path, Options{Threads: 1, NoVocab: true, Kernels: KernelsEdgellm, Repack: repack})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { e.Close() })
				return e
			}
			ref, eng := load(false), load(true)
			run := func(e *Engine, toks []int32) [][]float32 { return sessionStepLogits(t, e, sc, toks) }
			same := func(what string, got, want [][]float32) {
				t.Helper()
				for i := range want {
					if !slices.Equal(got[i], want[i]) {
						t.Fatalf("%s: step %d logits differ from the engine that never switched", what, i)
					}
				}
			}
			toks := greedyToks(t, ref, sc, n)
			want := run(ref, toks)

			w, own := eng.sets[0], eng.Report().OwnLayout
			units := len(w.units)
			ps := int64(os.Getpagesize())
			if own.Tensors == 0 || units < eng.Config().NLayer || eng.Report().Repack[0].Tensors != 0 {
				t.Fatalf("load: own layout %+v, %d units, ggml's buffer %+v", own, units, eng.Report().Repack[0])
			}
			for _, e := range []*Engine{ref, eng} {
				if st := e.RepackState(); st.Layers != units || st.MaxLayers != units || st.Bytes != own.Bytes || st.MaxBytes != own.Bytes {
					t.Fatalf("state after load %+v, want %d units and %d bytes (Repack %v)", st, units, own.Bytes, e.opts.Repack)
				}
			}
			if res := ownResident(t, w); res < own.Bytes-int64(units)*ps {
				t.Fatalf("q4x4 copies resident %d bytes of %d after load", res, own.Bytes)
			}
			same("loaded", run(eng, toks), want)

			// Release everything: pages back, plain kernels, same bits.
			c, err := eng.SetRepackLayers(0)
			if err != nil {
				t.Fatal(err)
			}
			if c.Released != units || c.ReleasedBytes != own.Bytes || c.To != 0 {
				t.Errorf("release all: %+v", c)
			}
			if st := eng.RepackState(); st.Layers != 0 || st.Bytes != 0 || st.MaxBytes != own.Bytes {
				t.Errorf("state after release %+v", st)
			}
			if res := ownResident(t, w); res != 0 || len(eng.own.byPtr) != 0 {
				t.Fatalf("after releasing every unit: %d bytes resident, %d copies in the lookup", res, len(eng.own.byPtr))
			}
			same("released", run(eng, toks), want)

			// Half: layers from 0 up.
			k := units / 2
			if _, err := eng.SetRepackLayers(k); err != nil {
				t.Fatal(err)
			}
			var half int64
			for i, held := range ownHeld(t, eng, w) {
				if held != (i < k) {
					t.Fatalf("k = %d: unit %d holds its copies: %v", k, i, held)
				}
				if i < k {
					half += w.units[i].bytes
				}
			}
			if st := eng.RepackState(); st.Layers != k || st.Bytes != half {
				t.Errorf("k = %d: state %+v, want %d bytes", k, st, half)
			}
			if res := ownResident(t, w); res < half-int64(k)*ps || res > half+int64(k)*ps {
				t.Errorf("k = %d: %d bytes resident, want about %d", k, res, half)
			}
			same("half", run(eng, toks), want)

			// In the middle of a session: each switch rebuilds the graph;
			// a stale graph would read released (zero) pages.
			s, err := eng.newSession(sc)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			stepSwitchingUnits(t, eng, s, toks, units, func(i int, l []float32) {
				if !slices.Equal(l, want[i]) {
					t.Fatalf("live switches: step %d logits differ from the engine that never switched", i)
				}
			})
			tok := []int32{toks[0]}
			if a := testing.AllocsPerRun(10, func() { _ = s.Decode(tok, engine.LogitsLast) }); a != 0 {
				t.Fatalf("%v allocations per decode step after the switches, want 0", a)
			}

			// All back: resident, held, and read by the graph.
			if st := eng.RepackState(); st.Layers != units || st.Bytes != own.Bytes {
				t.Fatalf("state after taking every unit back %+v", st)
			}
			if res := ownResident(t, w); res < own.Bytes-int64(units)*ps || slices.Contains(ownHeld(t, eng, w), false) {
				t.Fatalf("after taking every unit back: %d of %d bytes resident, held %v", res, own.Bytes, ownHeld(t, eng, w))
			}
			same("restored", run(eng, toks), want)
			clearOwnCopies(eng)
			if z := run(eng, toks[:1]); slices.Equal(z[0], want[0]) {
				t.Fatal("zeroed q4x4 copies left the logits unchanged: the restored units are not read")
			}

			// RepackLayers at load: the first k units copied, the rest
			// never written (RepackNone: none), decoding the same.
			for _, k := range []int{2, RepackNone} {
				e, err := Load(path, Options{Threads: 1, NoVocab: true, Kernels: KernelsEdgellm, Repack: true, RepackLayers: k})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				n := max(k, 0)
				var b int64
				for i, held := range ownHeld(t, e, e.sets[0]) {
					if held != (i < n) {
						t.Fatalf("RepackLayers %d at load: unit %d holds its copies: %v", k, i, held)
					}
					if i < n {
						b += e.sets[0].units[i].bytes
					}
				}
				// Slack: the huge page the last copied unit ends in (the
				// kernel faults in a whole one when the mapping is advised
				// for them: zeros, not copies).
				slack := int64(n) * ps
				if e.Report().OwnLayout.HugePageBytes > 0 && n > 0 {
					slack += 2 << 20
				}
				if st, res := e.RepackState(), ownResident(t, e.sets[0]); st.Layers != n || st.Bytes != b || res > b+slack {
					t.Fatalf("RepackLayers %d at load: state %+v, %d bytes resident, want %d", k, st, res, b)
				}
				same("RepackLayers at load", run(e, toks), want)
			}
		})
	}
}

// TestOwnLayoutTierSwap: a tier ladder (stories260K Q8_0 then Q4_0) with
// Kernels "edgellm" and Repack: the Q4_0 tier's units, not started on,
// hold no q4x4 copies at load; a swap to it makes them (the swap's advise
// step), a swap back releases them (pages given back, bytes reported 0).
// Decoding across both swaps is bitwise the engine loaded without Repack,
// which makes every set's copies at load and keeps them (ColdOff).
func TestOwnLayoutTierSwap(t *testing.T) {
	if !kernels.EdgellmQ4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	d := filepath.Join(sharedtest.Dir(), "models", "derived")
	q8, q4 := filepath.Join(d, "stories260K-ff192-Q8_0.gguf"), filepath.Join(d, "stories260K-ff192-Q4_0.gguf")
	load := func(repack bool, cold ColdAdvice) *Engine {
		e, err := Load(q8, Options{Threads: 1, NoVocab: true, Kernels: KernelsEdgellm, Repack: repack,
			ExtraSets: []string{q4}, Tiers: true, ColdAdvice: cold})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	ref, eng := load(false, ColdOff), load(true, ColdDontNeed)
	w4 := eng.sets[1]
	if len(eng.sets[0].units) != 0 || len(w4.units) == 0 || eng.Report().OwnLayout.Tensors == 0 {
		t.Fatalf("units: Q8_0 tier %d, Q4_0 tier %d; own layout %+v", len(eng.sets[0].units), len(w4.units), eng.Report().OwnLayout)
	}
	if st := ref.RepackState(); st.Bytes != ref.Report().OwnLayout.Bytes {
		t.Fatalf("without Repack every set's copies are made at load: %+v, layout %+v", st, ref.Report().OwnLayout)
	}
	if st := eng.RepackState(); st.Bytes != 0 || ownResident(t, w4) != 0 || slices.Contains(ownHeld(t, eng, w4), true) {
		t.Fatalf("the Q4_0 tier, not started on, holds copies at load: %+v, %d bytes resident", st, ownResident(t, w4))
	}
	toks := []int32{1, 403, 407, 261, 378, 414, 270, 262, 300, 310, 320, 330}
	decode := func(e *Engine, check func(step int)) [][]float32 {
		s, err := e.newSession(engine.SessionConfig{NCtx: 32, NBatch: 1, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var out [][]float32
		for i, tok := range toks {
			var to = -1
			switch i {
			case 4:
				to = 1
			case 8:
				to = 0
			}
			if to >= 0 {
				if _, err := s.SwapTier(to); err != nil {
					t.Fatal(err)
				}
				if check != nil {
					check(i)
				}
			}
			out = append(out, stepLogits(t, s, []int32{tok})...)
		}
		return out
	}
	got := decode(eng, func(step int) {
		st, res, held := eng.RepackState(), ownResident(t, w4), ownHeld(t, eng, w4)
		switch step {
		case 4: // on Q4_0: every unit in q4x4
			if st.Bytes != w4.RepackState().MaxBytes || st.Bytes == 0 || slices.Contains(held, false) || res < st.Bytes-int64(len(w4.units)*os.Getpagesize()) {
				t.Fatalf("swapped to Q4_0: state %+v, held %v, %d bytes resident", st, held, res)
			}
		case 8: // back on Q8_0: released
			if st.Bytes != 0 || slices.Contains(held, true) || res != 0 {
				t.Fatalf("swapped back to Q8_0: state %+v, held %v, %d bytes resident", st, held, res)
			}
		}
	})
	want := decode(ref, nil)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("step %d: logits differ from the engine that kept every copy", i)
		}
	}
}
