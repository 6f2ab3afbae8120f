//go:build linux

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// serveArgv is the engine's command line in serve mode: the run's model,
// policy, sensors and statistics, on a loopback port the kernel picks (the
// client reads it from the server's "serving on" line).
func (r *runner) serveArgv(tiers []string, statsPath, wasm string) []string {
	s := r.s
	a := []string{"serve", "--tiers", strings.Join(tiers, ","), "--engine", s.Engine}
	if s.Engine == "llamacpp" { // weights in anonymous memory, as in run mode
		a = append(a, "--no-mmap")
	}
	a = append(a, "--stats-json", statsPath, "--policy", wasm, "--policy-insecure", "--threads", strconv.Itoa(s.Threads), "--ctx", strconv.Itoa(s.Ctx),
		"--addr", "127.0.0.1:0", "--queue", "1")
	return append(a, r.sensors...)
}

// serveClient is the scenario's request stream against one server.
type serveClient struct {
	done   chan struct{} // closed when the client has stopped sending
	cancel context.CancelFunc
	out    ServeOutcome
}

var servingRE = regexp.MustCompile(`serving on http://(\S+)`)

// startServeClient waits for the server's address in its stderr, then
// sends requests one after another until the server has generated s.N
// tokens, a request fails, or ctx ends (the engine exited).
func startServeClient(ctx context.Context, s *Spec, stderrPath string) *serveClient {
	ctx, cancel := context.WithCancel(ctx)
	c := &serveClient{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(c.done)
		addr, err := waitServing(ctx, stderrPath)
		if err != nil {
			c.fail(err)
			return
		}
		c.out.Addr = addr
		for c.out.Tokens < s.N && ctx.Err() == nil {
			n, err := c.request(ctx, addr, s.Prompt, min(s.Serve.MaxTokens, s.N-c.out.Tokens))
			if err != nil {
				c.fail(err)
				return
			}
			if n == 0 {
				c.fail(fmt.Errorf("request %d generated no token", c.out.Requests))
				return
			}
			c.out.Completed++
			c.out.Tokens += n
		}
	}()
	return c
}

func (c *serveClient) fail(err error) {
	c.out.Failed++
	if c.out.FirstError == "" {
		c.out.FirstError = err.Error()
	}
}

// stop ends the client (the engine is gone) and returns what it saw.
func (c *serveClient) stop() *ServeOutcome {
	c.cancel()
	<-c.done
	return &c.out
}

func waitServing(ctx context.Context, stderrPath string) (string, error) {
	for {
		b, _ := os.ReadFile(stderrPath)
		if m := servingRE.FindSubmatch(b); m != nil {
			return string(m[1]), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the server never said where it listens: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// request sends one greedy completion and returns its completion tokens.
func (c *serveClient) request(ctx context.Context, addr, prompt string, maxTokens int) (int, error) {
	c.out.Requests++
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": maxTokens, "temperature": 0})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("request %d: %w", c.out.Requests, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("request %d: reading the answer: %w", c.out.Requests, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("request %d: %s: %.200s", c.out.Requests, resp.Status, b)
	}
	var v struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("request %d: %w", c.out.Requests, err)
	}
	return v.Usage.CompletionTokens, nil
}
