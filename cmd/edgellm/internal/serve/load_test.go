package serve

import (
	"context"
	"errors"
	"net/http"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go"
)

// TestSoakServeLoad: 32 clients × 20 requests on loopback through the openai-go
// client. Every answer is a completion or a 429; goroutines and RSS after
// the run are within 10% of after a warm-up round. Behind EDGELLM_SOAK
// (make soak); it logs the throughput it saw.
func TestSoakServeLoad(t *testing.T) {
	if os.Getenv("EDGELLM_SOAK") == "" {
		t.Skip("set EDGELLM_SOAK=1 (make soak)")
	}
	ts := newTestServer(t, testOptions{cfg: Config{Queue: 8}})
	round := func(clients, reqs int) (ok, rejected, tokens int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := 0; i < reqs; i++ {
					resp, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{Model: "stories260K",
						Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
						MaxTokens: openai.Int(16), Seed: openai.Int(int64(c*1000 + i))})
					var ae *openai.Error
					mu.Lock()
					switch {
					case err == nil:
						ok++
						tokens += int(resp.Usage.CompletionTokens)
					case errors.As(err, &ae) && ae.StatusCode == http.StatusTooManyRequests:
						rejected++
					default:
						t.Errorf("client %d request %d: %v", c, i, err)
					}
					mu.Unlock()
				}
			}(c)
		}
		wg.Wait()
		return
	}
	round(32, 2) // warm-up
	settle := func() (int, int64) {
		runtime.GC()
		time.Sleep(200 * time.Millisecond)
		rss, _, _ := readSmapsRollup()
		return runtime.NumGoroutine(), rss
	}
	g0, rss0 := settle()
	start := time.Now()
	ok, rejected, tokens := round(32, 20)
	el := time.Since(start)
	g1, rss1 := settle()
	t.Logf("32 clients × 20 requests: %d completed, %d got 429, %d tokens in %s: %.1f tok/s, %.1f completed requests/s (loopback, machine shared)",
		ok, rejected, tokens, el.Round(time.Millisecond), float64(tokens)/el.Seconds(), float64(ok)/el.Seconds())
	t.Logf("goroutines %d → %d, RSS %.1f → %.1f MiB", g0, g1, float64(rss0)/(1<<20), float64(rss1)/(1<<20))
	if ok+rejected != 640 || ok == 0 {
		t.Fatalf("%d completed + %d rejected of 640", ok, rejected)
	}
	if st := ts.worker.snapshot(); st.Failed != 0 {
		t.Fatalf("%d requests failed in the engine", st.Failed)
	}
	if float64(g1) > 1.1*float64(g0) || float64(rss1) > 1.1*float64(rss0) {
		t.Fatalf("goroutines %d → %d, RSS %d → %d: more than 10%% growth", g0, g1, rss0, rss1)
	}
}
