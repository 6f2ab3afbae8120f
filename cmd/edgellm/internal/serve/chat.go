package serve

import (
	"errors"
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

// Tokens formats msgs and tokenizes the prompt for v: with the model's
// template, its control tokens are parsed and the contents are not (see
// host.TokenizeChat); with PlainTemplate, all of it is text. It names the
// template used: "model" or PlainTemplate.
func (f *ChatFormatter) Tokens(v host.Vocab, msgs []Message) ([]int32, string, error) {
	if f.tmpl != "" {
		toks, err := host.TokenizeChat(v, f.tmpl, hostMessages(msgs), true)
		if err == nil {
			return toks, "model", nil
		}
		if !errors.Is(err, host.ErrChatTemplate) {
			return nil, "", err
		}
	}
	toks, err := v.Tokenize(plainPrompt(msgs), true)
	return toks, PlainTemplate, err
}

func hostMessages(msgs []Message) []host.ChatMessage {
	hm := make([]host.ChatMessage, len(msgs))
	for i, m := range msgs {
		hm[i] = host.ChatMessage{Role: m.Role, Content: m.Content}
	}
	return hm
}

// Format returns the prompt text and the template's name: "model" when the
// model's own template formatted it, PlainTemplate otherwise.
func (f *ChatFormatter) Format(msgs []Message) (prompt, name string) {
	if f.tmpl != "" {
		if p, err := host.ApplyChatTemplate(f.tmpl, hostMessages(msgs), true); err == nil {
			return p, "model"
		}
	}
	return plainPrompt(msgs), PlainTemplate
}

func plainPrompt(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(strings.ToUpper(m.Role[:1]) + m.Role[1:])
		b.WriteString(": ")
		b.WriteString(m.Content)
		b.WriteString("\n")
	}
	b.WriteString("Assistant:")
	return b.String()
}

// promptTokens is the request's prompt as tokens, and the chat template's
// name for a chat. A completion's prompt is parsed for special tokens, as
// llama-server parses it: "<|im_start|>" in it is that one control token,
// so a client that renders a chat template itself gets the model's format.
// (A chat's message contents are never parsed: ChatFormatter.Tokens.)
func (s *Server) promptTokens(req *Request) ([]int32, string, error) {
	var toks []int32
	var tmpl string
	var err error
	switch st, ok := s.vocab.(host.SpecialTokenizer); {
	case req.Chat:
		toks, tmpl, err = s.chat.Tokens(s.vocab, req.Messages)
	case ok:
		toks, err = st.TokenizeSpecial(req.Prompt, true)
	default:
		toks, err = s.vocab.Tokenize(req.Prompt, true)
	}
	if err != nil {
		return nil, "", badRequest("prompt", "tokenizing the prompt: %v", err)
	}
	if bos := s.vocab.BOS(); !req.Chat && bos >= 0 && len(toks) >= 2 && toks[0] == bos && toks[1] == bos {
		toks = toks[1:] // the prompt's own BOS text and the vocabulary's
	}
	if len(toks) == 0 {
		toks = []int32{s.vocab.BOS()}
	}
	return toks, tmpl, nil
}
