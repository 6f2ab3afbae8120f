package host

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
)

// fixedSensors is a SensorSource whose readings the test sets between
// turns (SIMULATED: an app pushing onTrimMemory), recording the steps it
// is filled at.
type fixedSensors struct {
	trim  abi.TrimLevel
	steps []int
}

func (f *fixedSensors) Fill(step int, _ time.Duration, dst *abi.Sensors) {
	f.steps = append(f.steps, step)
	if f.trim != abi.TrimNone {
		dst.TrimLevel, dst.Present = f.trim, dst.Present|abi.PresentTrimLevel
	}
}
func (f *fixedSensors) Describe() string { return "fixed test readings (SIMULATED)" }
func (f *fixedSensors) Close() error     { return nil }

// attachDefault attaches policies/default (built for wasip1 by the test,
// as `make policies` builds policies/default/default.wasm) to sess.
func attachDefault(t *testing.T, wasm string, sess Session, src SensorSource) *Adapter {
	t.Helper()
	cfg := policy.NewConfig().WithInsecure(true).WithDeadline(time.Second)
	a, err := AttachPolicy(context.Background(), sess, PolicyOptions{Path: wasm, Config: &cfg, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// turnResult is what one Generate call emitted and the logits each token
// was sampled from.
type turnResult struct {
	toks   []int32
	logits [][]float32
}

// decodeChunks decodes chunks, batch by batch, into a fresh session and
// returns the logits of each batch's last position.
func decodeChunks(t *testing.T, eng Engine, chunks [][]int32) [][]float32 {
	t.Helper()
	return decodeChunksWith(t, eng, SessionConfig{NCtx: 128, Threads: 1}, chunks)
}

// decodeChunksWith is decodeChunks in a session of config sc.
func decodeChunksWith(t *testing.T, eng Engine, sc SessionConfig, chunks [][]int32) [][]float32 {
	t.Helper()
	s, err := eng.NewSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out [][]float32
	for _, c := range chunks {
		if err := s.Decode(c, LogitsLast); err != nil {
			t.Fatal(err)
		}
		l := make([]float32, eng.Vocab().NVocab())
		if err := s.Logits(len(c)-1, l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func generateTurn(t *testing.T, sess Session, prompt []int32, n int, before func(int) error) turnResult {
	t.Helper()
	var r turnResult
	_, err := Generate(context.Background(), sess, GenerateOptions{Prompt: prompt, NPredict: n, Sampling: GreedySampling(),
		Emit:       func(tok int32) error { r.toks = append(r.toks, tok); return nil },
		OnLogits:   func(_ int, l []float32) error { r.logits = append(r.logits, slices.Clone(l)); return nil },
		BeforeStep: before})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestConversation: a session is a conversation, on both engines, with the
// default policy attached. Over three Generate calls on one session, every
// emitted token is in the KV cache when Generate returns; each turn's
// logits are bit for bit those of the same tokens decoded in the same
// batches by raw Decode calls; against a fresh session prefilled with the
// whole conversation as one prompt the greedy tokens are the same and the
// logits differ by no more than the parity tests' 1e-3 or, where larger,
// the engine's own difference between decoding these tokens in one batch
// and one at a time (batched matrix products round in another order: 1e-3
// to 1e-2 on stories260K, identical on both engines); a
// continuation is tokenized as it is inside one prompt (no BOS, no
// SentencePiece space prefix: " The" is the one token it is in "Once upon
// a time The"); one token (n = 1) is kept too.
func TestConversation(t *testing.T) {
	const n, tol = 6, 1e-3
	turns := []string{"Once upon a time", " The", " She was"}
	wasm := buildPolicyWasm(t, "default")
	forEachEngine(t, func(t *testing.T, eng Engine) {
		sess, err := eng.NewSession(SessionConfig{NCtx: 128, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		a := attachDefault(t, wasm, sess, &fixedSensors{})
		defer a.Close()
		var conv []int32     // every token the session should hold
		var chunks [][]int32 // the batches the session decoded them in
		text := ""
		for k, turn := range turns {
			prompt, err := Tokenize(sess, turn)
			if err != nil {
				t.Fatal(err)
			}
			text += turn
			// The conversation's text tokenized at once: its tokens so far
			// plus this turn's must be the same tokens when they are
			// separated at a word boundary (all but the generated text,
			// which the reference below feeds as tokens).
			if k > 0 {
				whole, err := eng.Vocab().Tokenize(turns[0]+turn, true)
				if err != nil {
					t.Fatal(err)
				}
				first, _ := eng.Vocab().Tokenize(turns[0], true)
				if want := whole[len(first):]; !slices.Equal(prompt, want) {
					t.Errorf("turn %d %q: continuation tokens %v, inside one prompt %v", k, turn, prompt, want)
				}
			}
			conv = append(conv, prompt...)
			got := generateTurn(t, sess, prompt, n, a.BeforeStep)
			conv = append(conv, got.toks...)
			chunks = append(chunks, prompt)
			for _, tk := range got.toks {
				chunks = append(chunks, []int32{tk})
			}
			// Exactly the KV cache of the same tokens decoded in the same
			// batches by raw Decode calls: the same logits, bit for bit.
			exact := decodeChunks(t, eng, chunks)
			for i := range got.logits {
				if !slices.Equal(got.logits[i], exact[len(exact)-n-1+i]) {
					t.Fatalf("turn %d token %d: logits differ from the same tokens decoded in the same batches", k, i)
				}
			}
			if sess.Len() != len(conv) {
				t.Fatalf("turn %d: session holds %d positions, the conversation has %d tokens", k, sess.Len(), len(conv))
			}

			ref, err := eng.NewSession(SessionConfig{NCtx: 128, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			want := generateTurn(t, ref, conv[:len(conv)-len(got.toks)], n, nil)
			ref.Close()
			if !slices.Equal(got.toks, want.toks) {
				t.Fatalf("turn %d: continued %v, one prompt %v", k, got.toks, want.toks)
			}
			maxD := 0.0
			for i := range got.logits {
				for j := range got.logits[i] {
					maxD = max(maxD, math.Abs(float64(got.logits[i][j]-want.logits[i][j])))
				}
			}
			// The engine's own difference between one batch and one token
			// at a time on these tokens (no host code involved): batched
			// matrix products round in another order.
			var singles [][]int32
			for _, tk := range conv[:len(conv)-1] {
				singles = append(singles, []int32{tk})
			}
			sl := decodeChunks(t, eng, singles)
			noise := 0.0
			for i := range want.logits {
				a, b := want.logits[i], sl[len(sl)-n+i]
				for j := range a {
					noise = max(noise, math.Abs(float64(a[j]-b[j])))
				}
			}
			t.Logf("turn %d %q: %d prompt tokens, max |Δlogit| %.3g against one prompt of %d (one batch against one token at a time: %.3g)",
				k, turn, len(prompt), maxD, len(conv)-n, noise)
			if maxD > max(tol, noise) {
				t.Errorf("turn %d: max |Δlogit| %.3g > %g and > the engine's own batch difference %.3g", k, maxD, tol, noise)
			}
		}

		one, err := eng.NewSession(SessionConfig{NCtx: 16, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer one.Close()
		p, _ := Tokenize(one, "Once")
		if r := generateTurn(t, one, p, 1, nil); len(r.toks) != 1 || one.Len() != len(p)+1 {
			t.Errorf("n = 1: %d token(s), session length %d, want 1 and %d", len(r.toks), one.Len(), len(p)+1)
		}
	})
}

// TestConversationPolicySteps: the policy numbers a session's steps across
// Generate calls (both engines, the default policy): its steps never go
// back or repeat, the first step of the second call follows the last of the
// first, the policy is called there, and a reading pushed between the two
// calls (a critical onTrimMemory, SIMULATED) reaches that first step.
func TestConversationPolicySteps(t *testing.T) {
	const n = 8
	wasm := buildPolicyWasm(t, "default")
	forEachEngine(t, func(t *testing.T, eng Engine) {
		sess, err := eng.NewSession(SessionConfig{NCtx: 64, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		src := &fixedSensors{}
		a := attachDefault(t, wasm, sess, src)
		defer a.Close()
		var firstOfTurn []abi.Sensors
		var called []bool
		hook := func(step int) error {
			calls := a.Stats().Calls
			err := a.BeforeStep(step)
			if step == 0 {
				firstOfTurn = append(firstOfTurn, *a.LastSensors())
				called = append(called, a.Stats().Calls > calls)
			}
			return err
		}
		p, _ := Tokenize(sess, "Once upon a time")
		generateTurn(t, sess, p, n, hook)
		turn1 := slices.Clone(src.steps)
		src.trim = abi.TrimRunningCritical // pushed between the turns
		more, _ := Tokenize(sess, " The")
		generateTurn(t, sess, more, n, hook)
		t.Logf("policy filled at steps %v (turn 1: %v); window now %d", src.steps, turn1, a.Current().Window)

		for i := 1; i < len(src.steps); i++ {
			if src.steps[i] <= src.steps[i-1] {
				t.Fatalf("policy steps %v go back or repeat", src.steps)
			}
		}
		// Turn 1: BeforeStep 0..n (n+1 calls, the last token's included),
		// so turn 2 starts at session step n+1.
		if !called[1] || firstOfTurn[1].Step != n+1 {
			t.Errorf("turn 2's first step: policy called %v at session step %d, want called at %d", called[1], firstOfTurn[1].Step, n+1)
		}
		if !firstOfTurn[1].Has(abi.PresentTrimLevel) || firstOfTurn[1].TrimLevel != abi.TrimRunningCritical {
			t.Errorf("turn 2's first step saw trim %d (present %v): the pushed reading did not reach it",
				firstOfTurn[1].TrimLevel, firstOfTurn[1].Has(abi.PresentTrimLevel))
		}
	})
}
