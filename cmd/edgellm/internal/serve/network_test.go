package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go"
)

// rawStream opens a streaming completion on a raw TCP connection with a
// small receive buffer and returns it unread.
func rawStream(t *testing.T, url string, maxTokens int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).SetReadBuffer(2048)
	body := fmt.Sprintf(`{"prompt":"Once","max_tokens":%d,"temperature":0,"stream":true}`, maxTokens)
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	t.Cleanup(func() { c.Close() })
	return c
}

// A client that never reads its stream, and one that reads 500 B/s, are
// cut off once their unread output passes the stream buffer; the engine
// never waits for them, so a client queued behind them is answered after
// the slow one's generation ends (bounded by tokens: at most the tokens
// that fill the socket buffers and --stream-buffer), not after the slow
// reader has read.
func TestSlowReadersDoNotStallOthers(t *testing.T) {
	for _, rate := range []int{0, 500} {
		t.Run(fmt.Sprintf("%dBps", rate), func(t *testing.T) {
			const maxTokens = 240
			// A write deadline far beyond the bound asserted below: the other
			// client must not be waiting for it to expire.
			const writeTimeout = 2 * time.Minute
			ts := newTestServer(t, testOptions{cfg: Config{StreamBuffer: 2048, WriteTimeout: writeTimeout}, sndBuf: 4096})
			slow := rawStream(t, ts.url, maxTokens)
			var read atomic.Int64
			if rate > 0 {
				go func() {
					b := make([]byte, rate/10)
					for {
						n, err := slow.Read(b)
						read.Add(int64(n))
						if err != nil {
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}()
			}
			// The slow client's job is running (or, on a fast machine, already
			// cut off) before the other arrives.
			for st := ts.worker.snapshot(); !st.Busy && st.Requests == 0; st = ts.worker.snapshot() {
				time.Sleep(time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), writeTimeout/4)
			defer cancel()
			c, err := ts.client.Completions.New(ctx, openai.CompletionNewParams{Model: "stories260K",
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Lily")}, MaxTokens: openai.Int(4), Temperature: openai.Float(0)})
			if err != nil {
				t.Fatalf("the other client, queued behind the slow one: %v", err)
			}
			st := ts.worker.snapshot()
			if c.Usage.CompletionTokens != 4 || st.SlowClients != 1 {
				t.Fatalf("other client: %d tokens; slow clients cut off: %d, want 1", c.Usage.CompletionTokens, st.SlowClients)
			}
			// Cut off well before its max_tokens, and answered before the
			// slow reader could have read its stream (~160 B a token).
			if slowTokens := st.GeneratedTokens - 4; slowTokens >= maxTokens {
				t.Fatalf("the slow client's job ran to its %d tokens: not cut off", slowTokens)
			}
			if r := read.Load(); r >= maxTokens*100 {
				t.Fatalf("the slow reader had read %d bytes when the other was answered", r)
			}
			t.Logf("slow reader (%d B/s) cut off after %d tokens, having read %d bytes; the other client was answered",
				rate, st.GeneratedTokens-4, read.Load())
		})
	}
}

// Clients that hang up while queued free their slots at once: /health
// shows none queued and the next requests are queued, not refused.
func TestQueuedHangupsFreeSlots(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Queue: 2}, noStart: true})
	post := func(ctx context.Context) <-chan error {
		errc := make(chan error, 1)
		go func() {
			_, err := ts.client.Completions.New(ctx, openai.CompletionNewParams{Model: "stories260K",
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(2)})
			errc <- err
		}()
		return errc
	}
	waitQueued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for ts.worker.queue.len() != n {
			if time.Now().After(deadline) {
				t.Fatalf("queue holds %d, want %d", ts.worker.queue.len(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	ctx, hangUp := context.WithCancel(context.Background())
	a, b := post(ctx), post(ctx)
	waitQueued(2)
	hangUp()
	<-a
	<-b
	waitQueued(0) // freed when the handlers saw the hang-up, with no worker running
	resp, err := http.Get(ts.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	decodeJSON(t, resp, &h)
	if h["queued"].(float64) != 0 {
		t.Fatalf("/health: %v", h)
	}
	c, d := post(context.Background()), post(context.Background())
	waitQueued(2)
	run, stop := context.WithCancel(context.Background())
	defer stop()
	go ts.Run(run)
	if err := <-c; err != nil {
		t.Fatal(err)
	}
	if err := <-d; err != nil {
		t.Fatal(err)
	}
	if st := ts.worker.snapshot(); st.Cancelled != 2 || st.Requests != 2 || ts.rejected.Load() != 0 {
		t.Fatalf("cancelled %d, ran %d, rejected %d; want 2, 2, 0", st.Cancelled, st.Requests, ts.rejected.Load())
	}
}

// A stream in flight when the server shuts down (its base context ends
// with ErrShutdown, as on SIGINT) ends with a server_shutdown error, not
// "the client went away".
func TestShutdownEndsStreamsWithShutdownError(t *testing.T) {
	base, shutdown := context.WithCancelCause(context.Background())
	defer shutdown(nil)
	gate := make(chan struct{})
	ts := newTestServer(t, testOptions{baseCtx: base, cfg: Config{OnToken: func(n int, _ int32) error {
		if n == 5 {
			<-gate // hold the engine at token 5 until the shutdown began
		}
		return nil
	}}})
	st := ts.client.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{Model: "stories260K",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(100)})
	if !st.Next() {
		t.Fatalf("no first chunk: %v", st.Err())
	}
	shutdown(ErrShutdown)
	close(gate)
	for st.Next() {
	}
	err := st.Err()
	if err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("stream ended with %v, want the server_shutdown error", err)
	}
}
