package serve

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestNodeSDK runs the OpenAI Node SDK (npm package openai, pinned in
// testdata/node/package-lock.json; `make serve-sdk` runs npm ci there)
// against the server: testdata/node/sdk.mjs checks models, completions and
// chat (streaming equal to non-streaming at temperature 0), error classes
// and their param, the API key. It skips without node, or without the
// package installed unless EDGELLM_REQUIRE_NODE_SDK is set (make test).
func TestNodeSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found: the Node SDK check needs node and npm (make serve-sdk)")
	}
	dir, _ := filepath.Abs("testdata/node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		if os.Getenv("EDGELLM_REQUIRE_NODE_SDK") != "" {
			t.Fatalf("the openai npm package is not installed in %s: run make serve-sdk", dir)
		}
		t.Skipf("the openai npm package is not installed in %s (make serve-sdk installs it)", dir)
	}
	ts := newTestServer(t, testOptions{cfg: Config{APIKey: "sdk-key"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, filepath.Join(dir, "sdk.mjs"), ts.url, "stories260K", "sdk-key").CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	ok := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "ok ") {
			ok++
		}
	}
	if err != nil || ok < 11 {
		t.Fatalf("Node SDK: %d checks ok, %v:\n%s", ok, err, out)
	}
	t.Logf("Node SDK: %d of %d checks ok", ok, len(lines))
}

// TestOpenAIGoV3 drives the server with openai-go v3.
func TestOpenAIGoV3(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{APIKey: "k3"}})
	c := openai.NewClient(option.WithBaseURL(ts.url+"/v1/"), option.WithAPIKey("k3"), option.WithMaxRetries(0))
	ctx := context.Background()
	m, err := c.Models.Get(ctx, "stories260K")
	if err != nil || m.ID != "stories260K" {
		t.Fatalf("Models.Get: %+v %v", m, err)
	}
	var apiErr *openai.Error
	if _, err := c.Models.Get(ctx, "nope"); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Param != "model" {
		t.Fatalf("Models.Get(nope): %v", err)
	}
	params := openai.ChatCompletionNewParams{
		Model:     "stories260K",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Tell a story."), openai.UserMessage("Lily had a dog.")},
		MaxTokens: openai.Int(10), Temperature: openai.Float(0),
	}
	cc, err := c.Chat.Completions.New(ctx, params)
	if err != nil || cc.Choices[0].Message.Content == "" || cc.Usage.CompletionTokens < 1 {
		t.Fatalf("chat: %+v %v", cc, err)
	}
	st := c.Chat.Completions.NewStreaming(ctx, params)
	var b strings.Builder
	for st.Next() {
		for _, ch := range st.Current().Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	if err := st.Err(); err != nil || b.String() != cc.Choices[0].Message.Content {
		t.Fatalf("stream %q (%v), non-stream %q", b.String(), err, cc.Choices[0].Message.Content)
	}
	params.PresencePenalty = openai.Float(0.5)
	if _, err := c.Chat.Completions.New(ctx, params); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "presence_penalty" {
		t.Fatalf("presence_penalty: %v", err)
	}
	bad := openai.NewClient(option.WithBaseURL(ts.url+"/v1/"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	if _, err := bad.Models.List(ctx); !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("wrong key: %v", err)
	}
}
