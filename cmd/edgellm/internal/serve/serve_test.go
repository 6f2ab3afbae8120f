package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
)

const testCtx = 256

// testServer serves stories260K (or a tier ladder with a policy) on a
// loopback httptest server. start=false leaves the worker stopped, so
// requests stay queued until the test calls Run.
type testServer struct {
	*Server
	adapter *host.Adapter
	url     string
	client  openai.Client
	cancel  context.CancelFunc
}

type testOptions struct {
	cfg       Config
	noStart   bool
	policy    string // a loose .wasm run on the tier ladder with a SIMULATED trace
	sensorsAt string
	// attach, when set, replaces policy: the options of the policy
	// attached to the tier ladder (Session is filled in).
	attach *host.PolicyOptions
	// tiers are the ladder's files in models/derived (default Q8_0, Q4_0).
	tiers []string
}

func newTestServer(t *testing.T, o testOptions) *testServer {
	t.Helper()
	host.SetLog(io.Discard, host.LogNone)
	lo := host.LoadOptions{}
	path := sharedtest.Stories260K(t)
	if o.policy != "" || o.attach != nil {
		d := filepath.Join(sharedtest.Dir(), "models", "derived")
		if o.tiers == nil {
			o.tiers = []string{"stories260K-ff192-Q8_0.gguf", "stories260K-ff192-Q4_0.gguf"}
		}
		for _, f := range o.tiers {
			lo.Tiers = append(lo.Tiers, filepath.Join(d, f))
		}
		path = ""
	}
	eng, err := host.Load(path, lo)
	if err != nil {
		t.Fatal(err)
	}
	sc := host.SessionConfig{NCtx: testCtx, Threads: 1}
	sess, err := eng.NewSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	var a *host.Adapter
	if o.attach != nil {
		po := *o.attach
		if a, err = host.AttachPolicy(context.Background(), sess, po); err != nil {
			t.Fatal(err)
		}
	} else if o.policy != "" {
		cfg := policy.NewConfig().WithInsecure(true).WithDeadline(time.Second)
		a, err = host.AttachPolicy(context.Background(), sess, host.PolicyOptions{
			Path: o.policy, Config: &cfg, Sensors: o.sensorsAt})
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := o.cfg
	cfg.ModelID, cfg.NCtx, cfg.KVType = "stories260K", testCtx, "f16"
	cfg.Sampling = host.SamplingParams{TopP: 1, RepeatPenalty: 1}
	s := New(cfg, eng, sess, a)
	ctx, cancel := context.WithCancel(context.Background())
	hs := httptest.NewServer(s)
	done := make(chan struct{})
	ts := &testServer{Server: s, adapter: a, url: hs.URL, cancel: cancel}
	ts.client = openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithAPIKey(cfg.APIKey+"x"[:boolInt(cfg.APIKey == "")]),
		option.WithMaxRetries(0))
	if !o.noStart {
		go func() { s.Run(ctx); close(done) }()
	} else {
		close(done)
	}
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
		if a != nil {
			a.Close()
		}
		sess.Close()
		eng.Close()
	})
	return ts
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// post sends a raw JSON body and decodes the JSON answer.
func (ts *testServer) post(t *testing.T, path, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return resp.StatusCode, m
}

func TestCompletionOpenAIClient(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	ctx := context.Background()
	c, err := ts.client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     "stories260K",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(12), Temperature: openai.Float(0), Seed: openai.Int(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 || c.Choices[0].Text == "" {
		t.Fatalf("choices: %+v", c.Choices)
	}
	if c.Usage.CompletionTokens < 1 || c.Usage.CompletionTokens > 12 || c.Usage.PromptTokens < 2 ||
		c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
		t.Fatalf("usage %+v", c.Usage)
	}
	if c.Usage.CompletionTokens == 12 && c.Choices[0].FinishReason != "length" {
		t.Fatalf("finish %q after max_tokens", c.Choices[0].FinishReason)
	}
	if _, ok := c.JSON.ExtraFields["edgellm"]; !ok {
		t.Fatalf("no edgellm extension in %s", c.RawJSON())
	}
	// Streaming gives the same greedy text, in chunks, then [DONE].
	st := ts.client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:     "stories260K",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(12), Temperature: openai.Float(0),
	})
	var b strings.Builder
	chunks := 0
	for st.Next() {
		for _, ch := range st.Current().Choices {
			b.WriteString(ch.Text)
		}
		chunks++
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if b.String() != c.Choices[0].Text || chunks < 2 {
		t.Fatalf("stream %q in %d chunks, non-stream %q", b.String(), chunks, c.Choices[0].Text)
	}
	models, err := ts.client.Models.List(ctx)
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "stories260K" {
		t.Fatalf("models: %+v, %v", models, err)
	}
}

func TestChatOpenAIClientAndPrefixReuse(t *testing.T) {
	ts := newTestServer(t, testOptions{})
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
	var ext Extension
	if err := json.Unmarshal([]byte(c1.JSON.ExtraFields["edgellm"].Raw()), &ext); err != nil {
		t.Fatal(err)
	}
	if ext.ChatTemplate != PlainTemplate || c1.Choices[0].Message.Role != "assistant" {
		t.Fatalf("template %q, message %+v", ext.ChatTemplate, c1.Choices[0].Message)
	}
	// The next turn continues the conversation: its prompt starts with the
	// previous prompt, whose KV is kept.
	params.Messages = append(params.Messages, openai.AssistantMessage(c1.Choices[0].Message.Content), openai.UserMessage("Then what?"))
	c2, err := ts.client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var ext2 Extension
	json.Unmarshal([]byte(c2.JSON.ExtraFields["edgellm"].Raw()), &ext2)
	if ext2.ReusedTokens < int(c1.Usage.PromptTokens)-1 || ext2.ReusedTokens >= int(c2.Usage.PromptTokens) {
		t.Fatalf("reused %d of %d prompt tokens; the first turn's prompt was %d", ext2.ReusedTokens, c2.Usage.PromptTokens, c1.Usage.PromptTokens)
	}
	// Reuse changes nothing in the answer: the same request on a cleared
	// KV (a different conversation in between) gives the same greedy text.
	if _, err := ts.client.Completions.New(ctx, openai.CompletionNewParams{Model: "stories260K",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Bob")}, MaxTokens: openai.Int(2)}); err != nil {
		t.Fatal(err)
	}
	c3, err := ts.client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if c3.Choices[0].Message.Content != c2.Choices[0].Message.Content {
		t.Fatalf("with reuse %q, without %q", c2.Choices[0].Message.Content, c3.Choices[0].Message.Content)
	}
}

func TestStreamCancel(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	st := ts.client.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "stories260K",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(testCtx - 8)})
	if !st.Next() {
		t.Fatalf("no first chunk: %v", st.Err())
	}
	cancel()
	for st.Next() {
	}
	st.Close()
	// The worker records the cancelled request; generation stopped early.
	deadline := time.Now().Add(10 * time.Second)
	for ts.worker.snapshot().Cancelled == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled request was not recorded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if g := ts.worker.snapshot().GeneratedTokens; g >= testCtx-8 {
		t.Fatalf("generated %d tokens: the disconnect did not stop generation", g)
	}
	// The engine serves the next client.
	if _, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{Model: "stories260K",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(4)}); err != nil {
		t.Fatal(err)
	}
}

func TestQueueFull429(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Queue: 1}, noStart: true})
	first := make(chan error, 1)
	go func() {
		_, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{Model: "stories260K",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(4)})
		first <- err
	}()
	for len(ts.worker.queue) == 0 {
		time.Sleep(time.Millisecond)
	}
	_, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{Model: "stories260K",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(4)})
	var apiErr *openai.Error
	if !asAPIError(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Response.Header.Get("Retry-After") == "" {
		t.Fatalf("second request with a full queue: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ts.Run(ctx)
	if err := <-first; err != nil {
		t.Fatalf("the queued request: %v", err)
	}
}

func TestRequestErrors(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{MaxBodyBytes: 4096}})
	long := strings.Repeat("Once upon a time there was a girl. ", 200)
	for _, c := range []struct{ path, body, want string }{
		{"/v1/completions", `{"prompt":"a","n":2}`, "n=2"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function"}]}`, `"tools"`},
		{"/v1/completions", `{"prompt":"a","logprobs":2}`, `"logprobs"`},
		{"/v1/completions", `{"prompt":"` + long[:2000] + `"}`, "context is 256"},
		{"/v1/completions", `{"prompt":"a","max_tokens":1000}`, "max_tokens is 1000"},
		{"/v1/completions", `{"prompt":"` + long + `"}`, "over 4096 bytes"},
		{"/v1/completions", `{"prompt":"a","temperature":3}`, "temperature=3"},
		{"/v1/chat/completions", `{"messages":[{"role":"tool","content":"a"}]}`, `role "tool"`},
	} {
		code, m := ts.post(t, c.path, c.body)
		msg, _ := m["error"].(map[string]any)["message"].(string)
		if code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("%s %.60s: %d %q, want 400 naming %s", c.path, c.body, code, msg, c.want)
		}
	}
}

func TestAPIKeyAndCORS(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{APIKey: "s3cret"}})
	body := `{"prompt":"a","max_tokens":1}`
	if code, _ := ts.post(t, "/v1/completions", body); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := ts.post(t, "/v1/completions", body, "Authorization", "Bearer s3creT"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	if code, m := ts.post(t, "/v1/completions", body, "Authorization", "Bearer s3cret"); code != http.StatusOK {
		t.Fatalf("right token: %d %v", code, m)
	}
	resp, err := http.Get(ts.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("health %d, CORS %q (off by default)", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

func TestMetrics(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	ts.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":8,"temperature":0}`)
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"edgellm_decode_tokens_per_second ", "edgellm_tier ", "edgellm_spec_k ", "edgellm_kv_window_tokens ",
		`edgellm_kv_type_info{kv_type="f16"} 1`, "edgellm_policy_calls_total ", "edgellm_policy_failures_total ", "edgellm_policy_revision ",
		"edgellm_rss_bytes ", "edgellm_pss_bytes ", "edgellm_requests_total 1\n"} {
		if !strings.Contains(string(b), name) {
			t.Errorf("/metrics lacks %q:\n%s", name, b)
		}
	}
}

// The policy runs between decode steps of requests, with a step count that
// grows across them; each response lists the decisions taken during it.
func TestPolicyDecisionsInResponses(t *testing.T) {
	ts := newTestServer(t, testOptions{policy: "../../../../host/policy/testdata/good_a.wasm",
		sensorsAt: "trace:../../../../testdata/traces/thermal_ramp.jsonl"})
	var all []Decision
	for i := 0; i < 6 && len(all) == 0; i++ {
		code, m := ts.post(t, "/v1/completions", `{"prompt":"Once upon a time","max_tokens":24,"temperature":0}`)
		if code != 200 {
			t.Fatalf("%d %v", code, m)
		}
		raw, _ := json.Marshal(m["edgellm"].(map[string]any)["decisions"])
		var ds []Decision
		json.Unmarshal(raw, &ds)
		all = append(all, ds...)
	}
	if len(all) == 0 {
		t.Fatal("no decision in any response, though the trace ramps the temperature")
	}
	if st := ts.worker.snapshot(); st.PolicyCalls == 0 || st.Change != len(all) {
		t.Fatalf("policy calls %d, changes %d, decisions in responses %d", st.PolicyCalls, st.Change, len(all))
	}
}

func TestRequestTimeout(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{RequestTimeout: time.Nanosecond}})
	code, m := ts.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":8}`)
	msg, _ := m["error"].(map[string]any)["message"].(string)
	if code != http.StatusBadRequest || !strings.Contains(msg, "1ns timeout") {
		t.Fatalf("%d %q", code, msg)
	}
}
