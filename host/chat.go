package host

import (
	"fmt"
	"slices"
	"strings"

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

// SpecialTokenizer is a Vocab that can also parse special-token text
// ("<|im_start|>", "<s>") into the tokens it names. Both engines'
// vocabularies implement it; TokenizeChat needs it.
type SpecialTokenizer interface {
	TokenizeSpecial(text string, addSpecial bool) ([]int32, error)
}

// chatMarker stands in for message i's content while finding where the
// template put it: no whitespace (templates trim contents), no text a
// tokenizer or template treats specially.
func chatMarker(i int) string { return fmt.Sprintf("\x1fEDGELLM-CONTENT-%d\x1f", i) }

// TokenizeChat formats msgs with tmpl (as ApplyChatTemplate) and tokenizes
// the prompt for v: the template's own text with special-token parsing, so
// its control tokens ("<|user|>", "<|im_end|>") are single tokens, and the
// messages' contents without it, so a user who writes "<|im_start|>system"
// gets text, not a control token. BOS is added when the model wants it,
// once: a template that writes its own BOS text does not get a second.
//
// When no content holds special-token text (the usual case) the tokens are
// exactly llama.cpp's for the whole prompt with special parsing. A content
// that does is tokenized on its own as text, between the template's pieces
// tokenized on their own.
func TokenizeChat(v Vocab, tmpl string, msgs []ChatMessage, addAssistant bool) ([]int32, error) {
	st, ok := v.(SpecialTokenizer)
	if !ok {
		return nil, fmt.Errorf("chat: the vocabulary (%T) cannot parse special tokens", v)
	}
	prompt, err := ApplyChatTemplate(tmpl, msgs, addAssistant)
	if err != nil {
		return nil, err
	}
	inject := false
	for _, m := range msgs {
		if m.Content == "" {
			continue
		}
		a, err := st.TokenizeSpecial(m.Content, false)
		if err != nil {
			return nil, err
		}
		b, err := v.Tokenize(m.Content, false)
		if err != nil {
			return nil, err
		}
		if !slices.Equal(a, b) {
			inject = true
			break
		}
	}
	var toks []int32
	if !inject {
		if toks, err = st.TokenizeSpecial(prompt, true); err != nil {
			return nil, err
		}
	} else if toks, err = tokenizeChatPieces(v, st, tmpl, msgs, addAssistant, prompt); err != nil {
		return nil, err
	}
	if bos := v.BOS(); bos >= 0 && len(toks) >= 2 && toks[0] == bos && toks[1] == bos {
		toks = toks[1:] // the template wrote BOS and the vocabulary added one
	}
	return toks, nil
}

// tokenizeChatPieces tokenizes prompt as the template's pieces (special
// parsing) and the contents between them (none).
func tokenizeChatPieces(v Vocab, st SpecialTokenizer, tmpl string, msgs []ChatMessage, addAssistant bool, prompt string) ([]int32, error) {
	marked := make([]ChatMessage, len(msgs))
	for i, m := range msgs {
		marked[i] = ChatMessage{Role: m.Role, Content: chatMarker(i)}
	}
	mp, err := ApplyChatTemplate(tmpl, marked, addAssistant)
	if err != nil {
		return nil, err
	}
	// Split the marked prompt into template text and message indices.
	type piece struct {
		text string
		msg  int // -1: template text
	}
	var pieces []piece
	for rest := mp; rest != ""; {
		i := strings.IndexByte(rest, '\x1f')
		if i < 0 {
			pieces = append(pieces, piece{rest, -1})
			break
		}
		end := strings.IndexByte(rest[i+1:], '\x1f')
		var n int
		if end < 0 || func() bool { _, e := fmt.Sscanf(rest[i+1:i+1+end], "EDGELLM-CONTENT-%d", &n); return e != nil }() || n < 0 || n >= len(msgs) {
			return nil, fmt.Errorf("chat: the template does not embed message contents verbatim")
		}
		if i > 0 {
			pieces = append(pieces, piece{rest[:i], -1})
		}
		pieces = append(pieces, piece{msg: n})
		rest = rest[i+1+end+1:]
	}
	// The contents as the template wrote them: verbatim or trimmed.
	for _, trim := range []bool{false, true} {
		var b strings.Builder
		for _, p := range pieces {
			if p.msg < 0 {
				b.WriteString(p.text)
			} else if c := msgs[p.msg].Content; trim {
				b.WriteString(strings.TrimSpace(c))
			} else {
				b.WriteString(c)
			}
		}
		if b.String() != prompt {
			continue
		}
		toks, err := v.Tokenize("", true) // BOS alone, if the model wants it
		if err != nil {
			return nil, err
		}
		for _, p := range pieces {
			var t []int32
			if p.msg < 0 {
				t, err = st.TokenizeSpecial(p.text, false)
			} else if c := msgs[p.msg].Content; trim {
				t, err = v.Tokenize(strings.TrimSpace(c), false)
			} else {
				t, err = v.Tokenize(c, false)
			}
			if err != nil {
				return nil, err
			}
			toks = append(toks, t...)
		}
		return toks, nil
	}
	return nil, fmt.Errorf("chat: the template does not embed message contents verbatim")
}
