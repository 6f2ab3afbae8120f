package native

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// FuzzSpecDecisions (#25 point 4): a program of decisions (window, per-layer
// windows, KV type, K, tier; the adaptive decisions a policy makes) applied
// between the rounds of a speculative session must never panic or fail, and
// the greedy text must equal a plain session's that gets the same decisions
// at the same token positions, as long as the decisions keep the
// computation exact.
//
// Exact: K (the target's argmax is verified either way), a tier swap and a
// KV type change (both sessions switch at the same position over the same
// rows; a lossy KV type changes the logits from there on, in both), a
// window that shrinks or is switched on, and anything after the window has
// not yet evicted a position. Not exact, so only checked for no failure: a
// window that grows after the ring has evicted positions. Evicted positions
// stay evicted, but which evicted rows are still physically in the ring
// depends on the history: a speculative session's rejected drafts overwrote
// slots a plain session still holds, and a grown window shows the plain
// session's back (ring.go relayout).
//
// A difference is rerun up to the token and told apart as in
// TestSpecWindowMatrix's nearTie: a near-tie between batched and
// single-token logits (#31: the plain top-2 margin below twice the largest
// logit difference the verify batches' KV makes, that difference within
// the parity tolerance) skips the input; any other fails.
//
// The program: byte 0 picks the draft (skip:3, self:q4_0, ngram, a draft
// model file), byte 1 the anchors (0-6) and byte 2 the first K; then
// each pair (op, arg) is one decision ((op&7) % 6) followed by the rounds of
// the next 6 + (op>>3)%24 tokens.
func FuzzSpecDecisions(f *testing.F) {
	// Seeds: draft, anchors, K, then (decision, arg, tokens until the next).
	const (
		opK, opWindow, opLayers, opKV, opTier, opOff = 0, 1, 2, 3, 4, 5
		w8, w16, w24, w40, w56, w100                 = 0, 1, 2, 3, 4, 5 // fuzzWindows
		f16, q8, q4                                  = 0, 1, 2
	)
	for _, seed := range [][]byte{
		// skip:3 with per-layer windows (the kind), then K, KV, tier, a shrink
		seedProg(0, 4, 4, opLayers, 0, 29, opK, 8, 29, opKV, q8, 29, opTier, 1, 29, opWindow, w8, 29),
		// self:q4_0: a window, lossy KV, the lowest tier, a shrink, K 0 then 6, KV back
		seedProg(1, 2, 2, opWindow, w56, 29, opKV, q4, 20, opTier, 2, 20, opWindow, w24, 29, opK, 0, 10, opK, 6, 29, opKV, f16, 29),
		// ngram: a large window, per-layer windows (a shrink), window off (refused), KV
		seedProg(2, 0, 8, opWindow, w100, 29, opLayers, 9, 29, opOff, 0, 29, opKV, q8, 29),
		// a draft model: window, KV (refused: shared arena), tier, per-layer windows, K 1
		seedProg(3, 3, 3, opWindow, w40, 29, opKV, q4, 29, opTier, 1, 29, opLayers, 6, 29, opK, 1, 29),
		// skip:3: a small window grown after it evicted (not exact), shrunk again
		seedProg(0, 6, 5, opWindow, w16, 29, opWindow, w100, 29, opWindow, w24, 29, opLayers, 3, 29),
		// self:q4_0, no window: KV and tier changes until the context is full
		seedProg(1, 1, 8, opKV, q8, 20, opTier, 1, 20, opKV, q4, 20, opTier, 0, 20, opK, 3, 20),
		// ngram: a window, then off (refused: the ring is in use), per-layer windows, tier
		seedProg(2, 5, 1, opWindow, w24, 6, opOff, 0, 29, opLayers, 17, 29, opTier, 2, 29),
	} {
		f.Add(seed)
	}
	e, err := Load(sharedtest.Path(f, specTarget), Options{Threads: 1, Tiers: true,
		ExtraSets: []string{sharedtest.Path(f, specQ8), sharedtest.Path(f, specQ4)}})
	if err != nil {
		f.Fatal(err)
	}
	defer e.Close()
	de, err := LoadDraft(sharedtest.Path(f, specQ8), e)
	if err != nil {
		f.Fatal(err)
	}
	defer de.Close()
	prompt, err := e.Vocab().Tokenize("Once upon a time, there was a little girl named Lily. She", true)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		runSpecProgram(t, e, de, prompt, prog)
	})
}

// kind is the decision: the op byte's low 3 bits, mod 6 (its high bits
// are the tokens to the next decision).
func (d specDecision) kind() int { return int(d.op&7) % 6 }

// seedProg writes a fuzz program: draft, anchors, K, then triples
// (decision, arg, tokens to the next decision, 6-29).
func seedProg(draft, anchors, k byte, triples ...byte) []byte {
	p := []byte{draft, anchors, k}
	for i := 0; i+2 < len(triples); i += 3 {
		p = append(p, triples[i]+8*(max(6, min(29, triples[i+2]))-6), triples[i+1])
	}
	return p
}

// specDecision is one decision of a fuzz program, applied when `at`
// tokens have been emitted.
type specDecision struct {
	at      int
	op, arg byte
}

const (
	fuzzNCtx   = 128
	fuzzNBatch = 16
	fuzzTokens = 200 // past the context when a window is on
)

// fuzzWindows are the windows a decision picks from (anchors + window + 1
// ≤ the context of 128 with up to 6 anchors).
var fuzzWindows = []int{8, 16, 24, 40, 56, 100}

// fuzzRun is a speculative run of a program: its session (holding every
// token but the last), the tokens and the decisions applied.
type fuzzRun struct {
	s       *Session
	sp      *Speculator
	got     []int32
	applied []specDecision
	exact   bool
	grown   int // Len when a window last grew after eviction (0: never)
}

func (r *fuzzRun) close() {
	r.sp.Close()
	r.s.Close()
}

func fuzzSession(t *testing.T, e *Engine) *Session {
	s, err := e.newSession(engine.SessionConfig{NCtx: fuzzNCtx, NBatch: fuzzNBatch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SwapTier(0); err != nil { // sessions start on the engine's last tier
		s.Close()
		t.Fatal(err)
	}
	return s
}

// specProgram runs prog speculatively until limit tokens (or a full
// context without a window), applying its decisions between rounds and
// recording those the session took.
func specProgram(t *testing.T, e *Engine, d DraftSpec, anchors int, prompt []int32, prog []byte, limit int) *fuzzRun {
	r := &fuzzRun{s: fuzzSession(t, e), exact: true}
	var err error
	if r.sp, err = NewSpeculator(r.s, d, greedyParams, int(prog[2])%(MaxSpecK+1)); err != nil {
		r.s.Close()
		t.Fatal(err)
	}
	s, sp := r.s, r.sp
	tok, err := sp.Start(prompt)
	if err != nil {
		r.close()
		t.Fatal(err)
	}
	r.got = []int32{tok}
	ops := prog[3:]
	full := func() bool { return s.rings[0].window == 0 && s.n >= s.nCtx }
	for i := 0; len(r.got) < limit && !full(); i += 2 {
		until := limit // after the program: run to the end
		if i+1 < len(ops) {
			dc := specDecision{at: len(r.got), op: ops[i], arg: ops[i+1]}
			ok, ex, err := applyDecision(s, sp, anchors, dc)
			if err != nil {
				r.close()
				t.Fatalf("decision %s at %d tokens: %v", fmtDecisions([]specDecision{dc}), len(r.got), err)
			}
			if ok {
				r.applied = append(r.applied, dc)
				r.exact = r.exact && ex
				if !ex {
					r.grown = s.Len()
				}
			}
			until = len(r.got) + 6 + int(ops[i]>>3)%24 // the next decision: 6-29 tokens on
		}
		for len(r.got) < min(until, limit) && !full() {
			out, err := sp.Step()
			if err != nil {
				r.close()
				t.Fatalf("round at %d tokens (Len %d, windows %v, K %d, %s): %v", len(r.got), s.Len(), s.LayerWindows(), sp.K(), d, err)
			}
			r.got = append(r.got, out...)
			if s.Len() != len(prompt)+len(r.got)-1 {
				r.close()
				t.Fatalf("Len %d after %d tokens", s.Len(), len(r.got))
			}
		}
	}
	return r
}

func runSpecProgram(t *testing.T, e *Engine, de *Engine, prompt []int32, prog []byte) {
	if len(prog) < 3 || len(prog) > 64 {
		return
	}
	drafts := []DraftSpec{{Kind: DraftSkip, N: 3}, {Kind: DraftSelf, Type: "q4_0"}, {Kind: DraftNgram}, {Kind: DraftModel, Path: specQ8, Eng: de}}
	d := drafts[int(prog[0])%len(drafts)]
	anchors := int(prog[1]) % 7
	nv := e.Config().NVocab

	r := specProgram(t, e, d, anchors, prompt, prog, fuzzTokens)
	defer r.close()
	checkHeldFrom(t, r.s, r.grown)
	got := r.got

	// The plain run: the same decisions at the same token counts.
	p := fuzzSession(t, e)
	defer p.Close()
	logits := make([]float32, nv)
	for i := 0; i < len(prompt); i += fuzzNBatch {
		if err := p.Decode(prompt[i:min(len(prompt), i+fuzzNBatch)], engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Logits(p.lastN-1, logits); err != nil {
		t.Fatal(err)
	}
	want := []int32{argmax(logits)}
	rows := [][]float32{slices.Clone(logits)}
	next := 0
	for len(want) < len(got) {
		for next < len(r.applied) && r.applied[next].at == len(want) {
			if ok, _, err := applyDecision(p, nil, anchors, r.applied[next]); err != nil || !ok {
				t.Fatalf("decision %s applied to the speculative session but not to the plain one: %v", fmtDecisions(r.applied[next:next+1]), err)
			}
			next++
		}
		if err := p.Decode(want[len(want)-1:], engine.LogitsLast); err != nil {
			t.Fatalf("plain decode at %d: %v", p.Len(), err)
		}
		if err := p.Logits(0, logits); err != nil {
			t.Fatal(err)
		}
		want = append(want, argmax(logits))
		rows = append(rows, slices.Clone(logits))
	}
	st := r.sp.Stats()
	t.Logf("%s, %d anchors: %d tokens, Len %d (context %d), %d rounds, %d drafted, exact %v, decisions %s",
		draftName(d), anchors, len(got), r.s.Len(), fuzzNCtx, st.Rounds, st.Drafted, r.exact, fmtDecisions(r.applied))
	if !r.exact {
		return
	}
	i := firstDiff(got, want)
	if i < 0 {
		return
	}
	if i == 0 {
		t.Fatalf("token 0: speculative %d, plain %d (the prefill is the same)", got[0], want[0])
	}
	// Near-tie or bug: rerun up to token i, drop the positions after
	// token i-1 (fewer than a batch: every ring still holds its window)
	// and decode token i-1 alone over the KV the verify batches wrote.
	r2 := specProgram(t, e, d, anchors, prompt, prog, i+1)
	defer r2.close()
	if j := firstDiff(r2.got[:i], want[:i]); j >= 0 {
		t.Fatalf("rerun: token %d differs before %d", j, i)
	}
	if err := r2.s.Truncate(len(prompt) + i - 1); err != nil {
		t.Fatal(err)
	}
	if err := r2.s.Decode(want[i-1:i], engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	ls := make([]float32, nv)
	if err := r2.s.Logits(0, ls); err != nil {
		t.Fatal(err)
	}
	lp := rows[i]
	diff := float32(0)
	for j := range lp {
		diff = max(diff, abs32(ls[j]-lp[j]))
	}
	best, second := sharedtestTop2(lp)
	margin := lp[best] - lp[second]
	if err := sharedtest.CompareLogits(ls, lp); err != nil || margin >= 2*diff {
		t.Fatalf("token %d: speculative %d, plain %d, not a near-tie: top-2 margin %.3g, batched-vs-single max |Δlogit| %.3g (%v); draft %s, anchors %d, decisions %s",
			i, got[i], want[i], margin, diff, err, draftName(d), anchors, fmtDecisions(r.applied))
	}
	t.Skipf("NEAR-TIE (issue #31 point 2) at token %d: plain top-2 margin %.3g (tokens %d, %d) < 2 × max |Δlogit| %.3g over the KV of batched verifies (decisions %s)",
		i, margin, best, second, diff, fmtDecisions(r.applied))
}

// checkHeldFrom fails unless every ring holds each anchor and each of the
// last `window` positions from position `from` on (a grown window shows
// the positions it had evicted only as they are decoded again).
func checkHeldFrom(t *testing.T, s *Session, from int) {
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
			lo = max(s.anchors, s.n-rg.window, from)
		}
		for p := 0; p < s.n; p++ {
			if (p < s.anchors || p >= lo) && !held[int32(p)] {
				t.Fatalf("ring %d (window %d): position %d of %d not held", r, rg.window, p, s.n)
			}
		}
	}
}

// applyDecision applies dc to s (and sp's K when sp is not nil). ok is
// false for a decision the session refused as documented (nothing
// changed); exact is false when it may make the speculative and plain
// sessions differ (a window grown after eviction).
func applyDecision(s *Session, sp *Speculator, anchors int, dc specDecision) (ok, exact bool, err error) {
	old := s.LayerWindows()
	grows := func(ws []int) bool {
		for il, w := range ws {
			if old[il] > 0 && w > old[il] && s.n > s.anchors+old[il] {
				return true
			}
		}
		return false
	}
	a := int(dc.arg)
	switch dc.kind() {
	case 0: // K
		if sp != nil {
			sp.SetK(a % (MaxSpecK + 1))
		}
		return true, true, nil
	case 1: // one window for every layer
		w := fuzzWindows[a%len(fuzzWindows)]
		ws := make([]int, len(old))
		for il := range ws {
			ws[il] = w
		}
		g := grows(ws)
		if err := s.SetWindow(anchors, w); err != nil {
			return false, true, refused(err, "anchors can change only")
		}
		return true, !g, nil
	case 2: // per-layer windows
		ws := make([]int, len(old))
		for il := range ws {
			ws[il] = fuzzWindows[(a+il*(1+a>>3))%len(fuzzWindows)]
		}
		g := grows(mergeWindows(ws))
		if err := s.SetLayerWindows(anchors, ws); err != nil {
			return false, true, refused(err, "anchors can change only")
		}
		return true, !g, nil
	case 3: // KV type
		typ := []engine.KVType{engine.KVF16, engine.KVQ8_0, engine.KVQ4_0}[a%3]
		if _, err := s.SetKVType(typ); err != nil {
			return false, true, refused(err, "shared with a draft model")
		}
		return true, true, nil
	case 4: // tier
		if _, err := s.SwapTier(a % 3); err != nil {
			return false, true, err
		}
		return true, true, nil
	default: // window off
		if old[0] == 0 {
			return false, true, nil
		}
		if err := s.SetWindow(anchors, 0); err != nil {
			return false, true, refused(err, "cannot turn the window off")
		}
		return true, true, nil
	}
}

// refused is nil for an error that says the decision was refused as
// documented (want), else err.
func refused(err error, want string) error {
	if strings.Contains(err.Error(), want) {
		return nil
	}
	return err
}

func fmtDecisions(ds []specDecision) string {
	names := []string{"K", "window", "layer windows", "KV", "tier", "window off"}
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "[%d: %s %d] ", d.at, names[d.kind()], d.arg)
	}
	return b.String()
}
