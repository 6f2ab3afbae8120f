package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// do sends a request and returns the status and the decoded JSON body
// (every status answers in JSON).
func (ts *testServer) do(t *testing.T, method, path, body string, hdr ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %d with a body that is not JSON: %q", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, m, resp.Header
}

func errOf(m map[string]any) (msg, param, code string) {
	e, _ := m["error"].(map[string]any)
	msg, _ = e["message"].(string)
	param, _ = e["param"].(string)
	code, _ = e["code"].(string)
	return
}

// Browser drive-bys and DNS rebinding are refused; the server's own page,
// non-browser clients and allowed origins/hosts are not.
func TestOriginHostAndContentType(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{AllowOrigins: []string{"http://app.example"}, AllowHosts: []string{"box.lan"}}})
	const body = `{"prompt":"a","max_tokens":1}`
	own := strings.TrimPrefix(ts.url, "http://")
	for _, c := range []struct {
		name string
		hdr  []string
		want int
		code string
	}{
		{"no Origin (curl, SDKs)", []string{"Content-Type", "application/json"}, 200, ""},
		{"the server's own page", []string{"Content-Type", "application/json", "Origin", ts.url}, 200, ""},
		{"an allowed origin", []string{"Content-Type", "application/json", "Origin", "http://app.example"}, 200, ""},
		{"another web site", []string{"Content-Type", "application/json", "Origin", "https://evil.example"}, 403, "origin_not_allowed"},
		{"a sandboxed page", []string{"Content-Type", "application/json", "Origin", "null"}, 403, "origin_not_allowed"},
		{"DNS rebinding", []string{"Content-Type", "application/json", "Host", "evil.example:80", "Origin", "http://evil.example:80"}, 403, "host_not_allowed"},
		{"localhost by name", []string{"Content-Type", "application/json", "Host", "localhost:" + own[strings.LastIndex(own, ":")+1:]}, 200, ""},
		{"an allowed host", []string{"Content-Type", "application/json", "Host", "box.lan"}, 200, ""},
		{"a form post", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"text/plain (no CORS preflight)", []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"JSON with a charset", []string{"Content-Type", "application/json; charset=utf-8"}, 200, ""},
	} {
		code, m, _ := ts.do(t, "POST", "/v1/completions", body, c.hdr...)
		if _, _, ec := errOf(m); code != c.want || ec != c.code {
			t.Errorf("%s: %d %q, want %d %q (%v)", c.name, code, ec, c.want, c.code, m)
		}
	}
}

// Every status is a JSON error; /v1/models/{id}; a lowercase auth scheme;
// penalties refused naming the field; type mismatches name the field.
func TestOpenAIErrorShapes(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{APIKey: "k"}})
	auth := []string{"Authorization", "Bearer k", "Content-Type", "application/json"}
	if code, m, _ := ts.do(t, "GET", "/nope", "", auth...); code != 404 {
		t.Errorf("GET /nope: %d %v", code, m)
	}
	if code, m, h := ts.do(t, "GET", "/v1/completions", "", auth...); code != 405 || h.Get("Allow") != "POST" {
		t.Errorf("GET /v1/completions: %d Allow %q %v", code, h.Get("Allow"), m)
	}
	if code, m, _ := ts.do(t, "GET", "/v1/models/stories260K", "", "Authorization", "bearer k"); code != 200 || m["id"] != "stories260K" {
		t.Errorf("GET /v1/models/stories260K with 'bearer': %d %v", code, m)
	}
	if code, m, _ := ts.do(t, "GET", "/v1/models/gpt-4", "", auth...); code != 404 {
		t.Errorf("GET /v1/models/gpt-4: %d %v", code, m)
	} else if _, p, _ := errOf(m); p != "model" {
		t.Errorf("GET /v1/models/gpt-4: param %q", p)
	}
	if code, _, _ := ts.do(t, "GET", "/v1/models", "", "Authorization", "BEARER k"); code != 200 {
		t.Errorf("BEARER: %d", code)
	}
	if code, _, _ := ts.do(t, "GET", "/v1/models", "", "Authorization", "Basic k"); code != 401 {
		t.Errorf("Basic: %d", code)
	}
	for _, c := range []struct{ body, param, want string }{
		{`{"prompt":"a","presence_penalty":0.5}`, "presence_penalty", "presence_penalty=0.5"},
		{`{"prompt":"a","frequency_penalty":-1}`, "frequency_penalty", "frequency_penalty=-1"},
		{`{"prompt":"a","max_tokens":"ten"}`, "max_tokens", "got a JSON string, want an integer"},
		{`{"prompt":"a","temperature":true}`, "temperature", "want a number"},
	} {
		code, m, _ := ts.do(t, "POST", "/v1/completions", c.body, auth...)
		msg, p, _ := errOf(m)
		if code != 400 || p != c.param || !strings.Contains(msg, c.want) || strings.Contains(msg, "float64") || strings.Contains(msg, "*int") {
			t.Errorf("%s: %d param %q %q", c.body, code, p, msg)
		}
	}
	if code, m, _ := ts.do(t, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1,"presence_penalty":0,"frequency_penalty":0}`, auth...); code != 200 {
		t.Errorf("zero penalties: %d %v", code, m)
	}
}

// TestToAPIError: an error of another type becomes a 500 carrying its
// text (the handlers type-asserted and would have panicked); a wrapped
// APIError is found.
func TestToAPIError(t *testing.T) {
	e := toAPIError(fmt.Errorf("tokenizer: %w", io.ErrUnexpectedEOF))
	if e.Status != http.StatusInternalServerError || !strings.Contains(e.Message, "unexpected EOF") {
		t.Fatalf("plain error: %+v", e)
	}
	want := badRequest("prompt", "bad")
	if got := toAPIError(fmt.Errorf("wrapped: %w", want)); got != want {
		t.Fatalf("wrapped APIError: got %+v", got)
	}
}
