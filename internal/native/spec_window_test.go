package native

import (
	"fmt"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// windowKind is one KV window layout of the speculation matrix.
type windowKind struct {
	name    string
	nCtx    int
	anchors int
	windows []int // nil: no window; one entry: every layer
}

// specWindowKinds: no window; a uniform window the generation never wraps;
// the per-layer windows (the shallow rings wrap); and a small
// uniform window that wraps many times and runs past the context of 64
// slots (context shift).
var specWindowKinds = []windowKind{
	{name: "none", nCtx: 512},
	{name: "uniform", nCtx: 512, anchors: 4, windows: []int{400}},
	{name: "perlayer", nCtx: 512, anchors: 4, windows: []int{16, 48, 32, 48, 24}},
	{name: "wrapping", nCtx: 64, anchors: 4, windows: []int{24}},
}

func windowSession(t testing.TB, e *Engine, wk windowKind, kv engine.KVType) *Session {
	t.Helper()
	s, err := e.newSession(engine.SessionConfig{NCtx: wk.nCtx, NBatch: 16, KVType: kv})
	if err != nil {
		t.Fatal(err)
	}
	switch len(wk.windows) {
	case 0:
	case 1:
		err = s.SetWindow(wk.anchors, wk.windows[0])
	default:
		err = s.SetLayerWindows(wk.anchors, wk.windows)
	}
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s
}

var greedyParams = sample.Params{TopP: 1, RepeatPenalty: 1}

// TestSpecSkipDeepRing is the panic: per-layer windows give the
// last layer a ring of its own (window 24), which a skip:3 draft pass does
// not run; the pass's graph had no allocated inputs for it and filling its
// mask panicked. The speculative text must equal the plain greedy text with
// the same windows, and the rounds must have drafted.
func TestSpecSkipDeepRing(t *testing.T) {
	e := loadSpecTarget(t)
	prompt := []int32{e.Vocab().BOS()}
	wk := windowKind{name: "issue", nCtx: 512, anchors: 4, windows: []int{16, 48, 32, 48, 24}}
	const n = 256
	s := windowSession(t, e, wk, "")
	want := plainRun(t, s, greedyParams, prompt, n)
	s.Close()
	s = windowSession(t, e, wk, "")
	defer s.Close()
	if len(s.rings) != 4 || s.ringOf[4] != 3 {
		t.Fatalf("rings %d, layer 4 on ring %d: the test needs the last layer alone on a ring", len(s.rings), s.ringOf[4])
	}
	got, st := specRun(t, s, DraftSpec{Kind: DraftSkip, N: 3}, greedyParams, 4, prompt, n)
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("token %d: speculative %d, plain %d", i, got[i], want[i])
	}
	if st.Rounds == 0 || st.Drafted == 0 {
		t.Fatalf("no speculative rounds: %+v", st)
	}
	checkHeld(t, s)
}

// TestSpecWindowMatrix (#25 point 4): every window kind × draft kind (skip,
// self, ngram, a draft model file) × KV type × K gives exactly the plain
// greedy text of the same window and KV type, 160 tokens. A difference
// that is a near-tie between batched and single-token logits (#31) is
// reported as a skip by nearTie; any other fails.
func TestSpecWindowMatrix(t *testing.T) {
	e := loadSpecTarget(t)
	de, err := LoadDraft(sharedtest.Path(t, specQ8), e)
	if err != nil {
		t.Fatal(err)
	}
	defer de.Close()
	drafts := []DraftSpec{{Kind: DraftSkip, N: 3}, {Kind: DraftSelf, Type: "q4_0"}, {Kind: DraftNgram},
		{Kind: DraftModel, Path: specQ8, Eng: de}}
	prompt := specPrompt(t, e)
	const n = 160
	// Two K per KV type, six K in all (the test stays under a minute on
	// a loaded 2-core machine).
	ks := [][]int{{1, 4}, {2, 8}, {3, 6}}
	for _, wk := range specWindowKinds {
		for ik, kv := range []engine.KVType{engine.KVF16, engine.KVQ8_0, engine.KVQ4_0} {
			s := windowSession(t, e, wk, kv)
			want := plainRun(t, s, greedyParams, prompt, n)
			s.Close()
			for _, d := range drafts {
				for _, k := range ks[ik] {
					t.Run(fmt.Sprintf("%s/%s/%s/K%d", wk.name, kv, draftName(d), k), func(t *testing.T) {
						s := windowSession(t, e, wk, kv)
						defer s.Close()
						got, st := specRun(t, s, d, greedyParams, k, prompt, n)
						if i := firstDiff(got, want); i >= 0 {
							nearTie(t, e, wk, kv, d, k, prompt, want, i)
						}
						if d.Kind != DraftNgram && st.Rounds == 0 {
							t.Fatalf("no speculative rounds: %+v", st)
						}
						if wk.nCtx < len(prompt)+n && s.Len() <= wk.nCtx {
							t.Fatalf("Len %d: the run did not go past the context of %d", s.Len(), wk.nCtx)
						}
					})
				}
			}
		}
	}
}

// nearTie is called when a speculative run's token i differs from the
// plain run's: it fails unless the flip is a near-tie between batched
// verification and single-token steps (issue #31 point 2), which it
// reports by skipping the subtest. It reruns the speculation up to token i,
// drops the positions after token i-1 (fewer than a batch: every ring still
// holds the window), and decodes token i-1 alone over the KV the verify
// batches wrote: those logits must be within the parity tolerance of the
// plain run's (sharedtest.CompareLogits), and the plain run's top-2 margin
// must be below twice their largest difference; otherwise it is a bug.
func nearTie(t *testing.T, e *Engine, wk windowKind, kv engine.KVType, d DraftSpec, k int, prompt, want []int32, i int) {
	t.Helper()
	if i == 0 {
		t.Fatalf("token 0: speculative differs from plain %d (the prefill is the same)", want[0])
	}
	nv := e.Config().NVocab
	row := func(s *Session) []float32 {
		if err := s.Truncate(len(prompt) + i - 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Decode(want[i-1:i], engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		l := make([]float32, nv)
		if err := s.Logits(0, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	ps := windowSession(t, e, wk, kv)
	defer ps.Close()
	plainRun(t, ps, greedyParams, prompt, i)
	lp := row(ps)
	ss := windowSession(t, e, wk, kv)
	defer ss.Close()
	got, _ := specRun(t, ss, d, greedyParams, k, prompt, i)
	if j := firstDiff(got, want[:i]); j >= 0 {
		t.Fatalf("rerun: token %d differs before %d", j, i)
	}
	ls := row(ss)
	diff := float32(0)
	for j := range lp {
		diff = max(diff, abs32(ls[j]-lp[j]))
	}
	best, second := sharedtestTop2(lp)
	margin := lp[best] - lp[second]
	if err := sharedtest.CompareLogits(ls, lp); err != nil || margin >= 2*diff {
		t.Fatalf("token %d: speculative differs from plain %d, not a near-tie: top-2 margin %.3g, batched-vs-single max |Δlogit| %.3g (%v)",
			i, want[i], margin, diff, err)
	}
	t.Skipf("NEAR-TIE (issue #31 point 2) at token %d: plain top-2 margin %.3g (tokens %d, %d) < 2 × max |Δlogit| %.3g between the KV of batched verifies and of single steps",
		i, margin, best, second, diff)
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// sharedtestTop2 is the indices of the two largest logits.
func sharedtestTop2(v []float32) (best, second int) {
	best, second = 0, 1
	if v[1] > v[0] {
		best, second = 1, 0
	}
	for j := 2; j < len(v); j++ {
		switch {
		case v[j] > v[best]:
			best, second = j, best
		case v[j] > v[second]:
			second = j
		}
	}
	return best, second
}

// draftName is a test name for d: skip:3, self:q4_0, ngram, file.
func draftName(d DraftSpec) string {
	if d.Kind == DraftModel {
		return "file"
	}
	return d.String()
}
