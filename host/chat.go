package host

import (
	"github.com/edgellm/edgellm/kernels"
)

// Chat prompts: a model's tokenizer.chat_template (ModelInfo.ChatTemplate)
// is matched against llama.cpp's built-in templates (llama.cpp has no Jinja
// interpreter), which then format the turns.

// ChatMessage is one turn of a chat.
type ChatMessage struct {
	Role    string // "system", "user", "assistant"
	Content string
}

// ErrChatTemplate is returned (wrapped) by ApplyChatTemplate for an empty
// template or one llama.cpp does not recognise.
var ErrChatTemplate = kernels.ErrChatTemplate

// ApplyChatTemplate formats msgs into a prompt with tmpl, a model's
// ModelInfo.ChatTemplate or a built-in name such as "chatml". addAssistant
// ends the prompt with the opening of the assistant's turn.
func ApplyChatTemplate(tmpl string, msgs []ChatMessage, addAssistant bool) (string, error) {
	km := make([]kernels.ChatMessage, len(msgs))
	for i, m := range msgs {
		km[i] = kernels.ChatMessage{Role: m.Role, Content: m.Content}
	}
	return kernels.ApplyChatTemplate(tmpl, km, addAssistant)
}
