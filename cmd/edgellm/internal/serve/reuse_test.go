package serve

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host"
	"github.com/openai/openai-go"
)

const defaultPolicyWasm = "../../../../policies/default/default.wasm"

// runJob runs one prompt on the (stopped) worker, as Run would.
func runJob(t *testing.T, w *worker, prompt []int32, n int) jobResult {
	t.Helper()
	j := &job{ctx: context.Background(), prompt: prompt, nPredict: n, sampling: host.SamplingParams{TopP: 1, RepeatPenalty: 1},
		emit: func(int32) error { return nil }, started: make(chan struct{}), done: make(chan jobResult, 1)}
	res := w.do(j)
	if res.err != nil {
		t.Fatal(res.err)
	}
	return res
}

// Under a KV window, a prompt that extends what the session holds keeps
// all of it; one that diverges earlier keeps only the anchors once the
// session has outgrown the window (the rest is said to be lost); while the
// window has evicted nothing, reuse is as without one.
func TestPrefixReuseUnderWindow(t *testing.T) {
	ts := newTestServer(t, testOptions{noStart: true})
	w := ts.worker
	ws, ok := w.sess.(host.WindowSetter)
	if !ok {
		t.Skipf("the %T session has no KV window", w.sess)
	}
	prompt := make([]int32, 60)
	for i := range prompt {
		prompt[i] = int32(1 + i%200)
	}
	if err := ws.SetWindow(4, 16); err != nil {
		t.Fatal(err)
	}
	runJob(t, w, prompt[:40], 4) // the session holds 40 prompt + the 4 generated tokens
	held := w.sess.Len()
	if held != 44 || len(w.cached) != held {
		t.Fatalf("session holds %d positions (worker's copy %d), want 44", held, len(w.cached))
	}
	win := abi.Decision{Window: 16, Anchors: 4}
	ext := append(append([]int32{}, w.cached...), 7, 8, 9)
	if keep, lost := w.reusableUnder(ext, win); keep != held || lost != 0 {
		t.Errorf("extension: keep %d lost %d, want %d, 0", keep, lost, held)
	}
	div := append(append([]int32{}, prompt[:30]...), 500, 501)
	if keep, lost := w.reusableUnder(div, win); keep != 4 || lost != 26 {
		t.Errorf("diverging at 30 under window 16: keep %d lost %d, want 4 (the anchors), 26", keep, lost)
	}
	if keep, lost := w.reusableUnder(div, abi.Decision{Window: testCtx}); keep != 30 || lost != 0 {
		t.Errorf("window = n_ctx (the adapter's start): keep %d lost %d, want 30, 0", keep, lost)
	}
	var sc [abi.MaxLayers]float32
	sc[0] = 0.5
	if keep, _ := w.reusableUnder(div, abi.Decision{Window: 100, LayerWindowScale: sc}); keep != 30 {
		t.Errorf("window 100 with a layer at 50 (≥ 44 held): keep %d, want 30", keep)
	}
	if keep, _ := w.reusableUnder(div, abi.Decision{Window: 80, Anchors: 2, LayerWindowScale: sc}); keep != 2 {
		t.Errorf("window 80 with a layer at 40 (< 44 held): keep %d, want 2", keep)
	}
}

// With the default policy attached (its adapter starts with window =
// n_ctx), the second turn of a chat reuses the first turn's prompt and
// reply: the reply's leading space is not sent back.
func TestChatPrefixReuseDefaultPolicy(t *testing.T) {
	if _, err := os.Stat(defaultPolicyWasm); err != nil {
		t.Skipf("%s not built (make policies): %v", defaultPolicyWasm, err)
	}
	ts := newTestServer(t, testOptions{policy: defaultPolicyWasm})
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:     "stories260K",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Tell a story."), openai.UserMessage("Lily had a dog.")},
		MaxTokens: openai.Int(10), Temperature: openai.Float(0),
	}
	c1, err := ts.client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if r := c1.Choices[0].Message.Content; r == "" || r[0] == ' ' {
		t.Fatalf("reply %q: want text without a leading space", r)
	}
	params.Messages = append(params.Messages, openai.AssistantMessage(c1.Choices[0].Message.Content), openai.UserMessage("Then what?"))
	c2, err := ts.client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var ext Extension
	json.Unmarshal([]byte(c2.JSON.ExtraFields["edgellm"].Raw()), &ext)
	// All of turn 1's prompt and reply is in the KV (at least all but the
	// last token, on engines that do not decode it).
	want := int(c1.Usage.PromptTokens + c1.Usage.CompletionTokens - 1)
	if ext.ReusedTokens < want {
		t.Fatalf("turn 2 reused %d prompt tokens, want ≥ %d (turn 1: %d prompt + %d reply); note %q",
			ext.ReusedTokens, want, c1.Usage.PromptTokens, c1.Usage.CompletionTokens, ext.ReuseNote)
	}
	t.Logf("turn 2: %d of %d prompt tokens reused under the default policy", ext.ReusedTokens, c2.Usage.PromptTokens)
}

// Without a policy, the window serve set itself (Config.Window, Anchors:
// serve --window --anchors) bounds prefix reuse the same way: a prompt
// diverging before the evicted positions keeps only the anchors, and
// the response says why.
func TestPrefixReuseUnderFixedWindow(t *testing.T) {
	ts := newTestServer(t, testOptions{noStart: true, cfg: Config{Window: 16, Anchors: 4}})
	w := ts.worker
	ws, ok := w.sess.(host.WindowSetter)
	if !ok {
		t.Skipf("the %T session has no KV window", w.sess)
	}
	if err := ws.SetWindow(4, 16); err != nil {
		t.Fatal(err)
	}
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(1 + i%200)
	}
	runJob(t, w, prompt, 4)
	div := append(append([]int32{}, prompt[:30]...), 500, 501)
	res := runJob(t, w, div, 4)
	if res.reused != 4 || res.reuseLost != 26 || res.reuseNote == "" {
		t.Errorf("diverging at 30 under window 16: reused %d lost %d (note %q), want 4 (the anchors), 26", res.reused, res.reuseLost, res.reuseNote)
	}
}
