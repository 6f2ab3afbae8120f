package native

import (
	"fmt"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestSpecDetachAttach: a draft dropped at 48 tokens and attached again at
// 112 (ABI 1.6's Decision.draft) leaves greedy text identical to plain
// decoding, for every draft kind, with full context and with a wrapping
// 4+48 window; while detached the draft holds no KV and no weights, every
// round is a plain step, and a draft model's KV pages are released, after
// which the target's KV type may change (it may not while they share the
// arena; once attached again the draft's KV is an arena of its own). The
// draft model is loaded again for Attach, as the host does.
func TestSpecDetachAttach(t *testing.T) {
	e := loadSpecTarget(t)
	prompt := specPrompt(t, e)
	const n, off, on = 192, 48, 112
	greedy := sample.Params{TopP: 1, RepeatPenalty: 1}
	drafts := specDrafts(t, e)
	for _, su := range specSetups[:2] {
		s := specSession(t, e, su)
		want := plainRun(t, s, greedy, prompt, n)
		s.Close()
		for _, d := range drafts {
			t.Run(fmt.Sprintf("%s/%s", su.name, d), func(t *testing.T) {
				s := specSession(t, e, su)
				defer s.Close()
				sp, err := NewSpeculator(s, d, greedy, 4)
				if err != nil {
					t.Fatal(err)
				}
				defer sp.Close()
				tok, err := sp.Start(prompt)
				if err != nil {
					t.Fatal(err)
				}
				out := []int32{tok}
				var kvBefore, wBefore int64
				var plainWhile int
				for len(out) < n {
					switch {
					case len(out) >= off && len(out) < on && !sp.Detached():
						kvBefore, wBefore = sp.DraftKVBytes(), sp.DraftWeightBytes()
						if d.Kind == DraftModel {
							if kvBefore <= 0 || wBefore <= 0 {
								t.Fatalf("attached draft model: KV %d, weights %d bytes", kvBefore, wBefore)
							}
							if _, err := s.SetKVType(engine.KVQ8_0); err == nil {
								t.Fatal("SetKVType while a draft model shares the arena: no error")
							}
						}
						if err := sp.Detach(); err != nil {
							t.Fatal(err)
						}
						if sp.DraftKVBytes() != 0 || sp.DraftWeightBytes() != 0 || !sp.Detached() {
							t.Fatalf("detached: KV %d, weights %d", sp.DraftKVBytes(), sp.DraftWeightBytes())
						}
						plainWhile = sp.Stats().PlainSteps
					case len(out) >= on && sp.Detached():
						if got := sp.Stats().PlainSteps - plainWhile; got < on-off-8 {
							t.Fatalf("%d plain steps while detached for %d tokens", got, on-off)
						}
						var de *Engine
						if d.Kind == DraftModel {
							if de, err = LoadDraft(sharedtest.Path(t, d.Path), e); err != nil {
								t.Fatal(err)
							}
							defer de.Close()
						}
						if err := sp.Attach(de); err != nil {
							t.Fatal(err)
						}
					}
					toks, err := sp.Step()
					if err != nil {
						t.Fatalf("after %d tokens: %v", len(out), err)
					}
					out = append(out, toks...)
				}
				if i := firstDiff(out[:n], want); i >= 0 {
					t.Fatalf("token %d: detach/attach %d, plain %d", i, out[i], want[i])
				}
				if sp.Detached() || (d.Kind == DraftModel && sp.DraftKVBytes() <= 0) {
					t.Fatalf("not attached again: KV %d", sp.DraftKVBytes())
				}
				if d.Kind == DraftModel {
					// The draft's KV is its own now: the target's type may
					// change under it (SIMULATED memory pressure), and the
					// rounds go on.
					if _, err := s.SetKVType(engine.KVQ8_0); err != nil {
						t.Fatalf("SetKVType after the draft's KV left the arena: %v", err)
					}
					for range 4 {
						if _, err := sp.Step(); err != nil {
							t.Fatalf("round after the KV type changed: %v", err)
						}
					}
				}
				st := sp.Stats()
				t.Logf("draft held KV %d + weights %d bytes before, 0 after detach; rounds %d, accepted %d, plain steps %d",
					kvBefore, wBefore, st.Rounds, st.Accepted, st.PlainSteps)
				if st.Accepted == 0 && d.Kind != DraftNgram {
					t.Fatal("no draft token accepted: the draft never worked")
				}
			})
		}
	}
}
