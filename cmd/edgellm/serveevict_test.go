package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// startServe runs `edgellm serve args... --addr 127.0.0.1:0` until the test
// ends and returns its base URL and stderr.
func startServe(t *testing.T, args ...string) (string, *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append(append([]string{"serve"}, args...), "--addr", "127.0.0.1:0"), io.Discard, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve: exit %d: %s", code, stderr.String())
		}
	})
	addr := regexp.MustCompile(`serving on (http://\S+)`)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d before listening: %s", code, stderr.String())
		default:
		}
		if a := addr.FindStringSubmatch(stderr.String()); a != nil {
			return a[1], &stderr
		}
	}
	t.Fatalf("serve did not listen: %s", stderr.String())
	return "", nil
}

// TestServeEvictFlag (issue #29): serve --evict merge sets the session's
// eviction mode for the policy's KV window: a request's decode steps read
// it back from host.EvictSetter (the policy's sensors, shown on /metrics),
// and --evict drop shows drop; without --policy or --window --evict merge
// is one usage line.
func TestServeEvictFlag(t *testing.T) {
	model := sharedtest.Stories260K(t)
	wasm := buildPolicy(t, "default")
	for _, mode := range []string{"merge", "drop"} {
		base, stderr := startServe(t, "-m", model, "--engine", "native", "--threads", "1", "--policy", wasm, "--policy-insecure", "--evict", mode)
		if got := strings.Contains(stderr.String(), "KV eviction: merge"); got != (mode == "merge") {
			t.Errorf("--evict %s: announced merge %v: %s", mode, got, stderr.String())
		}
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once upon a time","temperature":0,"max_tokens":8}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("--evict %s: completion %d", mode, resp.StatusCode)
		}
		resp, err = http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `edgellm_kv_evict_info{mode="` + mode + `"} 1`; !strings.Contains(string(b), want) {
			t.Errorf("--evict %s: no %q in /metrics:\n%s", mode, want, b)
		}
	}
	_, errs, code := runCLI(t, "serve", "-m", model, "--evict", "merge", "--addr", "127.0.0.1:0")
	if code != 2 || !strings.Contains(errs, "--evict merge needs --window or --policy") || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("serve --evict merge without --policy: exit %d, %q", code, errs)
	}
}
