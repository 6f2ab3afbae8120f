package host

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// decodes is the engine session's forward-pass count.
func decodes(t *testing.T, s Session) int64 {
	t.Helper()
	d, ok := s.(interface{ DecodeCount() int64 })
	if !ok {
		t.Fatalf("%T counts no decodes", s)
	}
	return d.DecodeCount()
}

// stateCase is a session shape a state is saved from and restored into.
type stateCase struct {
	name            string
	anchors, window int // 0: no window
	nBatch          int // small: the ring's end (anchors+window+n_batch, padded) is below the 80 positions saved
}

var stateCases = []stateCase{{name: "full"}, {name: "window-wrapped", anchors: 4, window: 24, nBatch: 16}}

// newStateSession makes a session of c's shape (nil, false when the engine
// has no windows).
func newStateSession(t *testing.T, eng Engine, c stateCase, kv KVType) (Session, bool) {
	t.Helper()
	s, err := eng.NewSession(SessionConfig{NCtx: 128, NBatch: c.nBatch, Threads: 1, KVType: kv})
	if err != nil {
		t.Fatal(err)
	}
	if c.window > 0 {
		ws, ok := s.(WindowSetter)
		if !ok {
			s.Close()
			return nil, false
		}
		if err := ws.SetWindow(c.anchors, c.window); err != nil {
			t.Fatal(err)
		}
	}
	return s, true
}

// savedState runs a 32-token prompt and 48 greedy tokens on a session of
// c's shape and returns it with its saved state.
func savedState(t *testing.T, eng Engine, c stateCase) (Session, []byte, bool) {
	t.Helper()
	a, ok := newStateSession(t, eng, c, "")
	if !ok {
		return nil, nil, false
	}
	prompt := make([]int32, 32)
	for i := range prompt {
		prompt[i] = int32(1 + i*7%400)
	}
	if _, err := Generate(context.Background(), a, GenerateOptions{Prompt: prompt, NPredict: 48, Sampling: GreedySampling()}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := a.(StateSaver).SaveState(&buf); err != nil {
		t.Fatal(err)
	}
	return a, buf.Bytes(), true
}

// A restored session holds what the saved one held without a forward pass:
// the logits of the next batch are bit-identical and the greedy
// continuation is the same, on both engines, with and without a wrapped
// window.
func TestStateRestoreContinues(t *testing.T) {
	forEachEngine(t, func(t *testing.T, eng Engine) {
		for _, c := range stateCases {
			t.Run(c.name, func(t *testing.T) {
				a, state, ok := savedState(t, eng, c)
				if !ok {
					t.Skip("no windows on this engine")
				}
				defer a.Close()
				b, _ := newStateSession(t, eng, c, "")
				defer b.Close()
				d0 := decodes(t, b)
				if err := b.(StateSaver).RestoreState(bytes.NewReader(state)); err != nil {
					t.Fatal(err)
				}
				if d := decodes(t, b); d != d0 || b.Len() != a.Len() {
					t.Fatalf("restore: %d forward passes, %d positions (saved %d)", d-d0, b.Len(), a.Len())
				}
				t.Logf("%d positions in %d bytes", a.Len(), len(state))
				next := []int32{5, 6, 7}
				la, lb := make([]float32, eng.Vocab().NVocab()), make([]float32, eng.Vocab().NVocab())
				for _, x := range []struct {
					s Session
					l []float32
				}{{a, la}, {b, lb}} {
					if err := x.s.Decode(next, LogitsLast); err != nil {
						t.Fatal(err)
					}
					if err := x.s.Logits(len(next)-1, x.l); err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(la, lb) {
					t.Fatalf("logits after restore differ: %v", sharedtest.CompareLogits(lb, la))
				}
				var ta, tb []int32
				for _, x := range []struct {
					s   Session
					out *[]int32
				}{{a, &ta}, {b, &tb}} {
					_, err := Generate(context.Background(), x.s, GenerateOptions{Prompt: []int32{9}, NPredict: 16, Sampling: GreedySampling(),
						Emit: func(tok int32) error { *x.out = append(*x.out, tok); return nil }})
					if err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(ta, tb) {
					t.Fatalf("restored session continues differently:\n%v\n%v", ta, tb)
				}
			})
		}
	})
}

// A state is refused, naming what differs, by a session of another KV
// type, window layout (anchors) or model of the same vocabulary but
// another shape; every truncation of it is an error (never a
// panic) and leaves the session empty.
func TestStateRestoreRefuses(t *testing.T) {
	forEachEngine(t, func(t *testing.T, eng Engine) {
		a, state, _ := savedState(t, eng, stateCases[0])
		defer a.Close()
		restore := func(s Session, b []byte) error {
			err := s.(StateSaver).RestoreState(bytes.NewReader(b))
			if err != nil && s.Len() != 0 {
				t.Fatalf("a failed restore left %d positions", s.Len())
			}
			return err
		}
		want := func(err error, what string) {
			t.Helper()
			if !errors.Is(err, ErrBadState) || !strings.Contains(err.Error(), what) {
				t.Fatalf("want an ErrBadState naming %q, got %v", what, err)
			}
		}
		f32, _ := newStateSession(t, eng, stateCases[0], KVF32)
		defer f32.Close()
		want(restore(f32, state), "KV type")
		if w, ok := newStateSession(t, eng, stateCases[1], ""); ok {
			want(restore(w, state), "anchors")
			w.Close()
		}
		other, err := Load(sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf"), LoadOptions{Engine: eng.Name()})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		o, err := other.NewSession(SessionConfig{NCtx: 128, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		want(restore(o, state), "another model")

		b, _ := newStateSession(t, eng, stateCases[0], "")
		defer b.Close()
		for n := 0; n < len(state); n += 1 + n/64 {
			if err := restore(b, state[:n]); err == nil {
				t.Fatalf("a state truncated to %d of %d bytes restored", n, len(state))
			}
		}
		if err := restore(b, append(slices.Clip(state), 0)); err == nil && eng.Name() == "native" {
			t.Fatal("a state with a trailing byte restored")
		}
		if err := restore(b, state); err != nil || b.Len() != a.Len() {
			t.Fatalf("the whole state after the refusals: %v, %d positions", err, b.Len())
		}
	})
}

// FuzzStateRestore: random bytes after a valid header (and random headers)
// are an error or a restore, never a panic, and a restored session is
// within its context.
func FuzzStateRestore(f *testing.F) {
	eng, err := Load(sharedtest.Stories260K(f), LoadOptions{Engine: "native"})
	if err != nil {
		f.Fatal(err)
	}
	defer eng.Close()
	a, err := eng.NewSession(SessionConfig{NCtx: 64, Threads: 1})
	if err != nil {
		f.Fatal(err)
	}
	defer a.Close()
	if err := a.Decode([]int32{1, 2, 3, 4, 5}, LogitsLast); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := a.(StateSaver).SaveState(&buf); err != nil {
		f.Fatal(err)
	}
	st := buf.Bytes()
	f.Add(st)
	f.Add(st[:len(st)/2])
	for _, i := range []int{8, 40, 60, 70, 80, 90, 100} {
		if i < len(st) {
			c := slices.Clone(st)
			c[i] ^= 0xff
			f.Add(c)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := a.(StateSaver).RestoreState(bytes.NewReader(data)); err == nil && (a.Len() > 64 || a.Len() < 0) {
			t.Fatalf("restored %d positions into a 64-token context", a.Len())
		}
	})
}
