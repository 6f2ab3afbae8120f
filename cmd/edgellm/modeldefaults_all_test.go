package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// The one context rule (host/engine/fit.go) on every command that picks a
// context or a length (#32 point 4): on models trained on 128 positions
// the defaults give way and say so; an explicit value that does not fit is
// a usage error (exit 2) naming both numbers. run, parity and bench's
// throughput are in TestRunDefaultsFitModel and TestDefaultsFitSmallModel.

// TestDraftContextFits: a draft model trained on 128 positions beside a
// target trained on 2048 (default --ctx 2048): the context follows the
// smaller model, on run --draft and bench --spec; an explicit --ctx above
// the draft's is refused naming the draft and both numbers.
func TestDraftContextFits(t *testing.T) {
	target := sharedtest.Stories260K(t)
	draft := withCtx(t, sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf"), 128)
	_, errs, code := runCLI(t, "run", "-m", target, "--draft", draft, "-n", "8", "--threads", "1", "--temp", "0")
	if code != 0 || !strings.Contains(errs, "context: 128 tokens (the training context of the draft "+draft) {
		t.Fatalf("run --draft (128) with the default --ctx: exit %d: %s", code, errs)
	}
	_, errs, code = runCLI(t, "bench", "-m", target, "--spec", draft, "-p", "16", "-n", "8", "-r", "1", "--threads", "1")
	if code != 0 || !strings.Contains(errs, "context: 128 tokens") {
		t.Fatalf("bench --spec (128) with the default --ctx: exit %d: %s", code, errs)
	}
	for _, args := range [][]string{
		{"run", "-m", target, "--draft", draft, "-n", "8", "--ctx", "256"},
		{"bench", "-m", target, "--spec", draft, "-p", "16", "-n", "8", "--ctx", "256"},
	} {
		_, errs, code := runCLI(t, args...)
		if code != 2 || !strings.Contains(errs, "--ctx 256 is above the training context 128 of the draft "+draft) {
			t.Errorf("%v: exit %d, %q; want exit 2 naming 256, 128 and the draft", args, code, errs)
		}
	}
}

// TestBenchModesFitContext: bench --activations (-p 128 + 1 decode step)
// and bench --swap (--ctx-tokens 512 + 1 check token) on models trained on
// 128 positions.
func TestBenchModesFitContext(t *testing.T) {
	m := withCtx(t, sharedtest.Stories260K(t), 128)
	_, errs, code := runCLI(t, "bench", "-m", m, "--activations")
	if code != 0 || !strings.Contains(errs, "-p 127") {
		t.Fatalf("bench --activations: exit %d: %s", code, errs)
	}
	_, errs, code = runCLI(t, "bench", "-m", m, "--activations", "-p", "128")
	if code != 2 || !strings.Contains(errs, "-p 128 + 1 decode step exceed the context 128") {
		t.Errorf("bench --activations -p 128: exit %d, %q", code, errs)
	}
	d := filepath.Dir(sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf")) + "/"
	q8, q4 := withCtx(t, d+"stories260K-ff192-Q8_0.gguf", 128), withCtx(t, d+"stories260K-ff192-Q4_0.gguf", 128)
	_, errs, code = runCLI(t, "bench", "--swap", "--tiers", q8+","+q4, "-r", "1", "--threads", "1")
	if code != 0 || !strings.Contains(errs, "context: 128 tokens") || !strings.Contains(errs, "--ctx-tokens 127") {
		t.Fatalf("bench --swap: exit %d: %s", code, errs)
	}
	_, errs, code = runCLI(t, "bench", "--swap", "--tiers", q8+","+q4, "--ctx", "256")
	if code != 2 || !strings.Contains(errs, "--ctx 256 is above the training context 128") {
		t.Errorf("bench --swap --ctx 256: exit %d, %q", code, errs)
	}
}

// TestCalibrateChunkFits: calibrate's default --chunk 512 gives way to a
// model trained on 128 positions; --chunk 256 set explicitly is refused.
func TestCalibrateChunkFits(t *testing.T) {
	d := filepath.Dir(sharedtest.Path(t, "models/derived/stories260K-ff192-f32.gguf")) + "/"
	f32, q8 := withCtx(t, d+"stories260K-ff192-f32.gguf", 128), withCtx(t, d+"stories260K-ff192-Q8_0.gguf", 128)
	text := sharedtest.Path(t, "text/stories.txt")
	out := filepath.Join(t.TempDir(), "m.json")
	_, errs, code := runCLI(t, "calibrate", f32, "--sets", q8, "--text", text, "-o", out, "--threads", "1")
	if code != 0 || !strings.Contains(errs, "--chunk 128 (the defaults --chunk 512 do not fit the context 128)") {
		t.Fatalf("calibrate with the default --chunk: exit %d: %s", code, errs)
	}
	_, errs, code = runCLI(t, "calibrate", f32, "--sets", q8, "--text", text, "-o", out, "--threads", "1", "--chunk", "256")
	if code != 2 || !strings.Contains(errs, "--chunk 256 exceed the context 128") {
		t.Errorf("calibrate --chunk 256: exit %d, %q", code, errs)
	}
}

// lockedBuffer is a bytes.Buffer safe to write from the server's goroutine
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeContextFits: serve on a model trained on 128 positions with the
// default --ctx (2048) serves a completion in a 128-token context;
// --ctx 256 is refused before listening.
func TestServeContextFits(t *testing.T) {
	m := withCtx(t, sharedtest.Stories260K(t), 128)
	// A serve that does not refuse would listen: the timeout ends it.
	refuse, stop := context.WithTimeout(context.Background(), time.Minute)
	var errb bytes.Buffer
	code := run(refuse, []string{"serve", "-m", m, "--ctx", "256", "--addr", "127.0.0.1:0"}, io.Discard, &errb)
	stop()
	if errs := errb.String(); code != 2 || !strings.Contains(errs, "--ctx 256 is above the training context 128") {
		t.Errorf("serve --ctx 256: exit %d, %q", code, errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-m", m, "--addr", "127.0.0.1:0", "--threads", "1"}, io.Discard, &stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve: exit %d: %s", code, stderr.String())
		}
	}()
	addr := regexp.MustCompile(`serving on (http://\S+)`)
	var base string
	for deadline := time.Now().Add(2 * time.Minute); base == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d before listening: %s", code, stderr.String())
		default:
		}
		if a := addr.FindStringSubmatch(stderr.String()); a != nil {
			base = a[1]
		}
	}
	if base == "" {
		t.Fatalf("serve did not listen: %s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "context: 128 tokens") {
		t.Errorf("the fitted context is not reported: %s", stderr.String())
	}
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once upon a time","temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	b, _ := io.ReadAll(bufio.NewReader(resp.Body))
	if err := json.Unmarshal(b, &body); err != nil || resp.StatusCode != 200 || len(body.Choices) != 1 {
		t.Fatalf("completion: %d %s (%v)", resp.StatusCode, b, err)
	}
	if n := body.Usage.PromptTokens + body.Usage.CompletionTokens; n > 128 || body.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v: want some tokens, at most 128 in all", body.Usage)
	}
}
