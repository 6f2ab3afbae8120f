package host

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// withChatTemplate writes a copy of the GGUF at src with tmpl as its
// tokenizer.chat_template.
func withChatTemplate(t *testing.T, src, tmpl string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "chat.gguf")
	if err := gguf.Rewrite(src, dst, func(kv []gguf.KV) []gguf.KV {
		return append(kv, gguf.KV{Key: "tokenizer.chat_template", Value: gguf.String(tmpl)})
	}); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestChatTemplate: both engines report the model's tokenizer.chat_template
// in ModelInfo ("" without one), and ApplyChatTemplate formats turns with
// it (ChatML here, spelled out); a template llama.cpp does not know is
// ErrChatTemplate.
func TestChatTemplate(t *testing.T) {
	const chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
	src := sharedtest.Path(t, "models/derived/stories260K-ff192-f32.gguf")
	withTmpl := withChatTemplate(t, src, chatml)
	msgs := []ChatMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}
	const want = "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
	for _, kind := range []string{"native", "llamacpp"} {
		for _, tc := range []struct {
			path, want string
		}{{src, ""}, {withTmpl, chatml}} {
			eng, err := Load(tc.path, LoadOptions{Engine: kind})
			if err != nil {
				t.Fatal(err)
			}
			got := eng.Info().ChatTemplate
			eng.Close()
			if got != tc.want {
				t.Errorf("%s, %s: ChatTemplate %q, want %q", kind, filepath.Base(tc.path), got, tc.want)
			}
		}
	}
	p, err := ApplyChatTemplate(chatml, msgs, true)
	if err != nil || p != want {
		t.Errorf("ApplyChatTemplate = %q, %v; want %q", p, err, want)
	}
	for _, tmpl := range []string{"", "no template llama.cpp knows"} {
		if _, err := ApplyChatTemplate(tmpl, msgs, true); !errors.Is(err, ErrChatTemplate) {
			t.Errorf("template %q: err = %v, want ErrChatTemplate", tmpl, err)
		}
	}
}
