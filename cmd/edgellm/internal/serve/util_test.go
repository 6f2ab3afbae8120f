package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go"
)

func asAPIError(err error, target **openai.Error) bool { return errors.As(err, target) }

func TestStopFilter(t *testing.T) {
	f := stopFilter{stops: []string{"END", "xy"}}
	var out string
	for _, p := range []string{"ab", "E", "N", "c", "EN", "D", "zz"} {
		out += f.push(p)
	}
	if out != "abENc" || !f.hit {
		t.Fatalf("got %q hit %v", out, f.hit)
	}
	f = stopFilter{stops: []string{"END"}}
	out = f.push("aE") + f.push("b") + f.flush()
	if out != "aEb" || f.hit {
		t.Fatalf("no stop: %q", out)
	}
}

func TestChatFormatter(t *testing.T) {
	msgs := []Message{{"system", "be brief"}, {"user", "hi"}}
	p, name := NewChatFormatter("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}").Format(msgs)
	if name != "model" || p != "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" {
		t.Fatalf("model template: %s %q", name, p)
	}
	for _, tmpl := range []string{"", "a template llama.cpp does not know"} {
		p, name = NewChatFormatter(tmpl).Format(msgs)
		if name != PlainTemplate || p != "System: be brief\nUser: hi\nAssistant:" {
			t.Fatalf("%q: %s %q", tmpl, name, p)
		}
	}
}

func decodeJSON(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
