package kernels

import (
	"errors"
	"strings"
	"testing"
)

func TestApplyChatTemplate(t *testing.T) {
	msgs := []ChatMessage{{"system", "be brief"}, {"user", "hi"}, {"assistant", "hello"}, {"user", "more"}}
	got, err := ApplyChatTemplate("chatml", msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Fatalf("chatml:\n%q\nwant\n%q", got, want)
	}
	// A Jinja text is matched by its markers, as a model's metadata carries it.
	got, err = ApplyChatTemplate("{% for m in messages %}<|im_start|>{{ m.role }}...", msgs[1:2], false)
	if err != nil || !strings.HasPrefix(got, "<|im_start|>user\nhi") {
		t.Fatalf("jinja chatml: %q, %v", got, err)
	}
	// Long content exceeds the first buffer guess only if the template
	// expands a lot; a long message must come back whole.
	long := strings.Repeat("x", 5000)
	got, err = ApplyChatTemplate("chatml", []ChatMessage{{"user", long}}, true)
	if err != nil || !strings.Contains(got, long) {
		t.Fatalf("long message: %d bytes, %v", len(got), err)
	}
	if _, err := ApplyChatTemplate("no template llama.cpp knows", msgs, true); !errors.Is(err, ErrChatTemplate) {
		t.Fatalf("unknown template: %v", err)
	}
}
