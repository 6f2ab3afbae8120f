package host

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// specWindow is a KV window layout of the host speculation matrix.
type specWindow struct {
	name    string
	nCtx    int
	anchors int
	windows []int // nil: none; one: every layer
}

func (w specWindow) apply(t *testing.T, sess Session) {
	t.Helper()
	var err error
	switch len(w.windows) {
	case 0:
		return
	case 1:
		err = sess.(WindowSetter).SetWindow(w.anchors, w.windows[0])
	default:
		err = sess.(LayerWindowSetter).SetLayerWindows(w.anchors, w.windows)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestSpecWindowMatrixHost (#25 point 4, through host): for each window
// kind (none; uniform, never wrapping; per-layer, the layout; a
// small window wrapping past a context of 64) and each draft kind (skip,
// self, ngram, a draft model file), Generate with a Draft gives the plain
// greedy text of the same window and KV type. KV type and K rotate over
// the cells (internal/native's TestSpecWindowMatrix runs every
// combination and tells near-ties apart).
func TestSpecWindowMatrixHost(t *testing.T) {
	d := filepath.Join(sharedtest.Dir(), "models", "derived")
	eng, err := Load(filepath.Join(d, "stories260K-ff192-f32.gguf"),
		LoadOptions{Engine: "native", LayerSets: []string{filepath.Join(d, "stories260K-ff192-Q4_0.gguf")}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	greedy := SamplingParams{TopP: 1, RepeatPenalty: 1}
	vocab := eng.Vocab()
	prompt, err := vocab.Tokenize("Once upon a time, there was a little girl named Lily. She", true)
	if err != nil {
		t.Fatal(err)
	}
	const n = 120
	windows := []specWindow{
		{name: "none", nCtx: 256},
		{name: "uniform", nCtx: 256, anchors: 4, windows: []int{200}},
		{name: "perlayer", nCtx: 256, anchors: 4, windows: []int{16, 48, 32, 48, 24}},
		{name: "wrapping", nCtx: 64, anchors: 4, windows: []int{24}},
	}
	drafts := []string{"skip:3", "self:q4_0", "ngram", filepath.Join(d, "stories260K-ff192-Q8_0.gguf")}
	kvs := []KVType{KVF16, KVQ8_0, KVQ4_0}
	ks := []int{1, 2, 4, 8}
	gen := func(t *testing.T, w specWindow, kv KVType, draft string, k int) ([]int32, Session) {
		sess, err := eng.NewSession(SessionConfig{NCtx: w.nCtx, Threads: 1, KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		w.apply(t, sess)
		var got []int32
		o := GenerateOptions{IgnoreEOG: true, Prompt: prompt, NPredict: n, Sampling: greedy,
			Emit: func(tok int32) error { got = append(got, tok); return nil }}
		if draft != "" {
			dr, err := AttachDraft(eng, sess, DraftOptions{Spec: draft, K: k, Sampling: greedy})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dr.Close() })
			o.Draft = dr
		}
		if _, err := Generate(context.Background(), sess, o); err != nil {
			t.Fatalf("%s: %v", draft, err)
		}
		return got, sess
	}
	for wi, w := range windows {
		want := map[KVType][]int32{}
		for di, draft := range drafts {
			kv, k := kvs[(wi+di)%len(kvs)], ks[(wi+2*di)%len(ks)]
			name := draft
			if di == 3 {
				name = "file"
			}
			t.Run(fmt.Sprintf("%s/%s/%s/K%d", w.name, name, kv, k), func(t *testing.T) {
				if want[kv] == nil {
					want[kv], _ = gen(t, w, kv, "", 0)
				}
				got, sess := gen(t, w, kv, draft, k)
				if i := firstDiff(got, want[kv]); i >= 0 {
					t.Fatalf("token %d: speculative %d, plain %d", i, got[i], want[kv][i])
				}
				if w.nCtx < len(prompt)+n && sess.Len() <= w.nCtx {
					t.Fatalf("Len %d: did not run past the context of %d", sess.Len(), w.nCtx)
				}
			})
		}
	}
}

// TestContextShiftPolicyWindow (#25 point 3, a policy-set window): a
// window set between steps (as an adapter applies a policy's decision,
// here from BeforeStep at step 8) lets Generate run past the context of 64
// slots, with the text of a 512-slot session given the same window at the
// same step; without it, generation stops with ErrContextFull at 64.
func TestContextShiftPolicyWindow(t *testing.T) {
	eng, err := Load(sharedtest.Stories260K(t), LoadOptions{Engine: "native"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	vocab := eng.Vocab()
	const n = 200
	run := func(nCtx int, window bool) ([]int32, Session, error) {
		sess, err := eng.NewSession(SessionConfig{NCtx: nCtx, NBatch: 16, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		var got []int32
		o := GenerateOptions{IgnoreEOG: true, Prompt: []int32{vocab.BOS()}, NPredict: n, Sampling: SamplingParams{TopP: 1, RepeatPenalty: 1},
			Emit: func(tok int32) error { got = append(got, tok); return nil }}
		o.BeforeStep = func(step int) error {
			if window && step == 8 {
				return sess.(WindowSetter).SetWindow(4, 24)
			}
			return nil
		}
		_, err = Generate(context.Background(), sess, o)
		return got, sess, err
	}
	small, sess, err := run(64, true)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Len() != n+1 { // BOS and every generated token (the last one too)
		t.Fatalf("Len %d after %d tokens from BOS, want %d", sess.Len(), n, n+1)
	}
	big, _, err := run(512, true)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(small, big); i >= 0 {
		t.Fatalf("token %d: %d in 64 slots, %d in 512", i, small[i], big[i])
	}
	if _, sess, err := run(64, false); !errors.Is(err, ErrContextFull) || sess.Len() != 64 {
		t.Fatalf("without a window: %v at Len %d, want context full at 64", err, sess.Len())
	}
}
