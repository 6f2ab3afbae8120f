package serve

import (
	"strings"

	"github.com/edgellm/edgellm/host"
)

// PlainTemplate is the name of the template used for models without a
// tokenizer.chat_template that llama.cpp recognises: each turn on its own
// lines as "<Role>: <content>", then "Assistant:" for the reply:
//
//	System: be brief
//	User: hi
//	Assistant:
const PlainTemplate = "plain"

// ChatFormatter turns chat messages into a prompt and names the template
// it used.
type ChatFormatter struct {
	tmpl string // the model's tokenizer.chat_template ("" if none)
}

// NewChatFormatter uses tmpl, the model's tokenizer.chat_template, when
// llama.cpp's template support recognises it, else PlainTemplate.
func NewChatFormatter(tmpl string) *ChatFormatter {
	return &ChatFormatter{tmpl: tmpl}
}

// Format returns the prompt and the template's name: "model" when the
// model's own template formatted it, PlainTemplate otherwise.
func (f *ChatFormatter) Format(msgs []Message) (prompt, name string) {
	if f.tmpl != "" {
		hm := make([]host.ChatMessage, len(msgs))
		for i, m := range msgs {
			hm[i] = host.ChatMessage{Role: m.Role, Content: m.Content}
		}
		if p, err := host.ApplyChatTemplate(f.tmpl, hm, true); err == nil {
			return p, "model"
		}
	}
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(strings.ToUpper(m.Role[:1]) + m.Role[1:])
		b.WriteString(": ")
		b.WriteString(m.Content)
		b.WriteString("\n")
	}
	b.WriteString("Assistant:")
	return b.String(), PlainTemplate
}
