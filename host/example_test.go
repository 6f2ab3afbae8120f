package host_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// model is a model of the shared test assets (../shared/models beside the
// repository, or $EDGELLM_SHARED/models).
func model(name string) string { return filepath.Join(sharedtest.Dir(), "models", name) }

// ladder is a tier ladder of stories260K: Q8_0, then Q4_0.
func ladder() []string {
	d := filepath.Join(sharedtest.Dir(), "models", "derived")
	return []string{filepath.Join(d, "stories260K-ff192-Q8_0.gguf"), filepath.Join(d, "stories260K-ff192-Q4_0.gguf")}
}

// text detokenizes generated tokens.
func text(v host.Vocab, toks []int32) string {
	var b, p []byte
	for _, t := range toks {
		p = v.Piece(p[:0], t)
		b = append(b, p...)
	}
	return string(b)
}

// Generate greedy text from a prompt.
func ExampleGenerate() {
	host.SetLog(os.Stderr, host.LogError) // llama.cpp's and ggml's own messages: errors only
	eng, err := host.Load(model("stories260K.gguf"), host.LoadOptions{})
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	sess, err := eng.NewSession(host.SessionConfig{NCtx: 128, Threads: 1})
	if err != nil {
		panic(err)
	}
	defer sess.Close()

	vocab := eng.Vocab()
	prompt, _ := host.Tokenize(sess, "Once upon a time") // a new session: from BOS
	var out []int32
	st, err := host.Generate(context.Background(), sess, host.GenerateOptions{
		Prompt: prompt, NPredict: 20, Sampling: host.GreedySampling(),
		Emit: func(tok int32) error {
			out = append(out, tok)
			return nil
		}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("engine %s, %d tokens:%s\n", eng.Name(), st.GeneratedTokens, text(vocab, out))
	// Output:
	// engine native, 20 tokens:, there was a little girl named Lily. She loved to play outsid
}

// Attach a WebAssembly policy to a session of a tier ladder: the policy
// (here a fixed one that asks for tier 1) chooses the tier between steps, and
// the host migrates the KV cache.
func ExampleAttachPolicy() {
	eng, err := host.Load("", host.LoadOptions{Tiers: ladder()})
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	sc := host.SessionConfig{NCtx: 128, Threads: 1}
	sess, err := eng.NewSession(sc)
	if err != nil {
		panic(err)
	}
	defer sess.Close()

	// A loose .wasm (production uses signed bundles), and a deadline
	// generous enough that this example's output never depends on how busy
	// the machine is (the default is 5 ms).
	cfg := policy.NewConfig().WithInsecure(true).WithDeadline(time.Second)
	a, err := host.AttachPolicy(context.Background(), sess, host.PolicyOptions{
		Path: "policy/testdata/good_a.wasm", Config: &cfg,
		Sensors: "trace:../testdata/traces/thermal_ramp.jsonl", // SIMULATED readings; "" reads this machine
	})
	if err != nil {
		panic(err)
	}
	defer a.Close()

	vocab := eng.Vocab()
	var out []int32
	opts := host.GenerateOptions{NPredict: 20, Sampling: host.SamplingParams{TopP: 1, RepeatPenalty: 1}, BeforeStep: a.BeforeStep}
	prompt, _ := vocab.Tokenize("Once upon a time", true)
	opts.Prompt = prompt
	opts.Emit = func(tok int32) error {
		out = append(out, tok)
		return nil
	}
	if _, err := host.Generate(context.Background(), sess, opts); err != nil {
		panic(err)
	}
	st := a.Stats()
	fmt.Printf("tier %d after %d swap(s):%s\n", a.Current().Tier, st.Swaps, text(vocab, out))
	// Output:
	// tier 1 after 1 swap(s):, there was a little girl named Lily. She loved to play outsid
}

// Swap tiers by hand: the session moves to the lower-precision tier after
// 10 tokens, carrying its KV cache over.
func ExampleTierSwapper() {
	eng, err := host.Load("", host.LoadOptions{Tiers: ladder()})
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	sess, err := eng.NewSession(host.SessionConfig{NCtx: 128, Threads: 1})
	if err != nil {
		panic(err)
	}
	defer sess.Close()

	swapper := sess.(host.TierSwapper)
	vocab := eng.Vocab()
	var out []int32
	var swaps []string
	opts := host.GenerateOptions{NPredict: 20, Sampling: host.SamplingParams{TopP: 1, RepeatPenalty: 1}}
	opts.BeforeStep = func(step int) error {
		if step != 10 {
			return nil
		}
		t, err := swapper.SwapTier(1)
		swaps = append(swaps, fmt.Sprintf("%d→%d at token %d", t.From, t.To, step))
		return err
	}
	prompt, _ := vocab.Tokenize("Once upon a time", true)
	opts.Prompt = prompt
	opts.Emit = func(tok int32) error {
		out = append(out, tok)
		return nil
	}
	if _, err := host.Generate(context.Background(), sess, opts); err != nil {
		panic(err)
	}
	fmt.Println(strings.Join(swaps, ", "))
	fmt.Println(text(vocab, out))
	// Output:
	// 0→1 at token 10
	// , there was a little girl named Lily. She loved to play outsid
}

// Generate with speculative decoding: the model's first 3 layers draft 4
// tokens a round and the whole model verifies them in one batch. Greedy
// output is the model's own (the same text as ExampleGenerate).
func ExampleAttachDraft() {
	eng, err := host.Load(model("stories260K.gguf"), host.LoadOptions{Engine: "native"})
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	sess, err := eng.NewSession(host.SessionConfig{NCtx: 128, Threads: 1})
	if err != nil {
		panic(err)
	}
	defer sess.Close()
	greedy := host.SamplingParams{TopP: 1, RepeatPenalty: 1}
	draft, err := host.AttachDraft(eng, sess, host.DraftOptions{Spec: "skip:3", K: 4, Sampling: greedy})
	if err != nil {
		panic(err)
	}
	defer draft.Close() // before the session

	vocab := eng.Vocab()
	prompt, _ := vocab.Tokenize("Once upon a time", true)
	var out []int32
	st, err := host.Generate(context.Background(), sess, host.GenerateOptions{
		Prompt: prompt, NPredict: 20, Draft: draft,
		Emit: func(tok int32) error {
			out = append(out, tok)
			return nil
		}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("draft %s, %d tokens:%s\n", draft, st.GeneratedTokens, text(vocab, out))
	// Output:
	// draft skip:3, 20 tokens:, there was a little girl named Lily. She loved to play outsid
}
