package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// GET / is the embedded page; GET /events streams ticks and a "request"
// event for each finished request.
func TestPageAndEvents(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	resp, err := http.Get(ts.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.url+"/events", nil)
	ev, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Body.Close()
	sc := bufio.NewScanner(ev.Body)
	kinds := map[string]bool{}
	posted, done := false, make(chan int, 1)
	for sc.Scan() && !(kinds["tick"] && kinds["request"]) {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		kinds[e.Kind] = true
		if e.Kind == "tick" && !posted {
			posted = true
			go func() { code, _ := ts.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":4}`); done <- code }()
		}
	}
	if code := <-done; code != 200 {
		t.Fatalf("completion: %d", code)
	}
	if !kinds["tick"] || !kinds["request"] {
		t.Fatalf("events seen: %v (%v)", kinds, sc.Err())
	}
}
