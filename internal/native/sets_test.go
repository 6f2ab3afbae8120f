package native

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// ladder is the stories260K precision ladder: f32 (the base), Q8_0, Q4_0.
func ladder(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, n := range []string{"f32", "Q8_0", "Q4_0"} {
		out = append(out, sharedtest.Path(t, "models/derived/stories260K-ff192-"+n+".gguf"))
	}
	return out
}

// trace decodes a prompt and then steps tokens one by one, returning the
// logits after each Decode. before runs before step i (0 = the prompt).
func trace(t *testing.T, s *Session, steps int, before func(i int)) [][]float32 {
	t.Helper()
	prompt := []int32{1, 403, 407, 261, 378, 293, 280, 284}
	var out [][]float32
	toks := prompt
	for i := 0; i <= steps; i++ {
		if before != nil {
			before(i)
		}
		if i > 0 { // fixed by position, not sampled: both sides see the same tokens
			toks = []int32{int32((s.Len()*37 + 11) % s.cfg.NVocab)}
		}
		if err := s.Decode(toks, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		l := make([]float32, s.cfg.NVocab)
		if err := s.Logits(len(toks)-1, l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func sameLogits(t *testing.T, what string, a, b [][]float32) {
	t.Helper()
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				t.Fatalf("%s: step %d logit %d: %v != %v", what, i, j, a[i][j], b[i][j])
			}
		}
	}
}

func single(t *testing.T, path string, steps int) [][]float32 {
	t.Helper()
	e, err := Load(path, Options{Threads: 1, NoVocab: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.newSession(engine.SessionConfig{NCtx: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return trace(t, s, steps, nil)
}

// TestLayerSetsParity: all layers on set 0 = the base file alone; all layers
// and the head on the Q4_0 set = the Q4_0 file alone (bit-identical logits).
func TestLayerSetsParity(t *testing.T) {
	files := ladder(t)
	e, err := Load(files[0], Options{Threads: 1, NoVocab: true, ExtraSets: files[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sets := e.Sets()
	want := []struct {
		typ  string
		bits int
	}{{"f32", 32}, {"q8_0", 8}, {"q4_0", 4}}
	for i, w := range want {
		if !strings.EqualFold(sets[i].Type, w.typ) || sets[i].Bits != w.bits {
			t.Errorf("set %d: %+v, want type %s, %d bits", i, sets[i], w.typ, w.bits)
		}
	}
	const steps = 6
	for _, tc := range []struct {
		name string
		set  int
		file string
	}{{"base", 0, files[0]}, {"q8_0", 1, files[1]}, {"q4_0", 2, files[2]}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := e.newSession(engine.SessionConfig{NCtx: 128})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			all := make([]int, e.Config().NLayer)
			for i := range all {
				all[i] = tc.set
			}
			if err := s.SetLayerSets(all); err != nil {
				t.Fatal(err)
			}
			if err := s.SetHeadSet(tc.set); err != nil {
				t.Fatal(err)
			}
			sameLogits(t, tc.name, single(t, tc.file, steps), trace(t, s, steps, nil))
		})
	}
}

// TestLayerSetsSwitchMidGeneration: switching to a mixed selection keeps the
// KV cache (Len unchanged, earlier rows untouched, logits finite), and
// switching back after truncating reproduces the never-switched run exactly.
func TestLayerSetsSwitchMidGeneration(t *testing.T) {
	files := ladder(t)
	e, err := Load(files[0], Options{Threads: 1, NoVocab: true, ExtraSets: files[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.newSession(engine.SessionConfig{NCtx: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref := trace(t, s, 4, nil) // never switched
	if err := s.Truncate(0); err != nil {
		t.Fatal(err)
	}

	mixed := []int{0, 1, 2, 1, 2}
	var kvBefore []string
	var n int
	got := trace(t, s, 4, func(i int) {
		switch i {
		case 2: // after the prompt and one step: switch, decode one token on the mix
			n = s.Len()
			for il := range s.kv.K {
				kvBefore = append(kvBefore, string(s.kv.region(il, false)[:n*int(s.kv.RowK)]))
			}
			if err := s.SetLayerSets(mixed); err != nil {
				t.Fatal(err)
			}
			if s.Len() != n {
				t.Fatalf("Len %d after the switch, want %d", s.Len(), n)
			}
		case 3: // drop the mixed token, back to set 0
			for il := range s.kv.K {
				if string(s.kv.region(il, false)[:n*int(s.kv.RowK)]) != kvBefore[il] {
					t.Fatalf("layer %d: KV rows before the switch changed", il)
				}
			}
			if err := s.Truncate(n); err != nil {
				t.Fatal(err)
			}
			if err := s.SetLayerSets(make([]int, len(mixed))); err != nil {
				t.Fatal(err)
			}
		}
	})
	for _, v := range got[2] {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("non-finite logit on the mixed selection")
		}
	}
	if same := func() bool {
		for j := range got[2] {
			if got[2][j] != ref[2][j] {
				return false
			}
		}
		return true
	}(); same {
		t.Fatal("the mixed selection produced exactly the base logits: the switch did nothing")
	}
	// Step 3 ran on set 0 again at the position of ref's step 2, over the
	// original prefix: the same logits bit for bit; step 4 follows it.
	sameLogits(t, "back on set 0", ref[2:4], got[3:5])
	if s.Stats().GraphBuilds < 3 {
		t.Errorf("%d graph builds; each switch must rebuild", s.Stats().GraphBuilds)
	}
}

// TestLayerSetsErrors: mismatching extra sets are refused before mapping,
// naming the file and the mismatch; bad indices are refused.
func TestLayerSetsErrors(t *testing.T) {
	files := ladder(t)
	other := sharedtest.Path(t, "models/derived/stories260K-first4layers.gguf")
	_, err := Load(files[0], Options{NoVocab: true, ExtraSets: []string{files[1], other}})
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "layers 4, want 5") {
		t.Fatalf("mismatched layer count: %v", err)
	}
	sh := defaultTiny()
	_, err = Load(files[0], Options{NoVocab: true, ExtraSets: []string{writeTiny(t, sh)}})
	if err == nil || !strings.Contains(err.Error(), "not the same model") {
		t.Fatalf("another model: %v", err)
	}
	if _, err = Load(files[0], Options{NoVocab: true, ExtraSets: []string{"/nonexistent.gguf"}}); err == nil {
		t.Fatal("missing extra set loaded")
	}
	if _, err = Load(files[0], Options{NoVocab: true, ColdAdvice: "sometimes"}); err == nil {
		t.Fatal("bad cold advice accepted")
	}

	e, err := Load(files[0], Options{Threads: 1, NoVocab: true, ExtraSets: files[2:]})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.newSession(engine.SessionConfig{NCtx: 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{s.SetLayerSet(5, 0), s.SetLayerSet(0, 2), s.SetLayerSet(-1, 0),
		s.SetLayerSets([]int{0, 1}), s.SetLayerSets([]int{0, 1, 1, 1, 7}), s.SetHeadSet(2)} {
		if err == nil {
			t.Error("out-of-range selection accepted")
		}
	}
	if got := s.LayerSets(); got[4] != 0 {
		t.Errorf("a refused SetLayerSets changed layer 4 to %d", got[4])
	}
	s.Close()
	if err := s.SetLayerSet(0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("closed session: %v", err)
	}
	// All sessions closed: every (set, layer) use count is back to zero.
	for si := range e.use {
		for il, n := range e.use[si].layer {
			if n != 0 {
				t.Errorf("set %d layer %d: %d users after close", si, il, n)
			}
		}
	}
}
