package serve

import (
	"errors"
	"testing"
)

// FuzzDecodeRequest: any body gives a request within the documented
// bounds or an *APIError, never a panic.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"Once","max_tokens":8,"temperature":0.5,"top_p":0.9,"seed":3,"stop":["\n"],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"yo"}]}],"n":1}`,
		`{"prompt":["a"],"stop":"x"}`, `{"prompt":"a","n":3}`, `{"prompt":"a","tools":[]}`, `{"prompt":"a","logprobs":null}`,
		`{"messages":[]}`, `{"prompt":"a","max_tokens":-1}`, `{"prompt":"a","temperature":1e400}`, `[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		r, err := DecodeRequest(body, chat)
		if err != nil {
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Message == "" {
				t.Fatalf("error %v is not a 400 APIError", err)
			}
			return
		}
		if r.MaxTokens < 0 || r.Temperature < 0 || r.Temperature > 2 || r.TopP <= 0 || r.TopP > 1 || len(r.Stop) > maxStops {
			t.Fatalf("out of bounds: %+v", r)
		}
		if chat && len(r.Messages) == 0 {
			t.Fatalf("chat request without messages: %+v", r)
		}
		for _, m := range r.Messages {
			if !roles[m.Role] || m.Role == "developer" {
				t.Fatalf("role %q", m.Role)
			}
		}
	})
}
