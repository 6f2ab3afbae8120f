package serve

import (
	"context"
	"io"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/synthtest"
)

// rstripAfter drops the whitespace after each of specials in text, as
// llama.cpp's tokenizer does after a token it marks RSTRIP (every special
// token of a model named Phi-3).
func rstripAfter(text string, specials map[string]int32) string {
	var b strings.Builder
	for text != "" {
		at, name := len(text), ""
		for s := range specials {
			if k := strings.Index(text, s); k >= 0 && (k < at || k == at && len(s) > len(name)) {
				at, name = k, s
			}
		}
		b.WriteString(text[:at])
		if name == "" {
			break
		}
		b.WriteString(name)
		text = strings.TrimLeft(text[at+len(name):], " \t\n")
	}
	return b.String()
}

// TestChatFamiliesServe serves each family's SYNTHETIC tiny model, which
// carries the family's chat template and control tokens, on both engines,
// and talks to it with the OpenAI Go SDK (openai-go v3):
//   - /v1/chat/completions renders the chat with the model's template
//     (edgellm.chat_template "model"), and the prompt's tokens are exactly
//     llama.cpp's rendering of the family's built-in template with each
//     control token one id (expectChatTokens); usage.prompt_tokens counts
//     them;
//   - generation stops at the family's end-of-turn token: on a copy of the
//     model whose greedy reply is that token (synthtest.EndTurn), the
//     reply is empty with finish_reason "stop", streaming or not, and the
//     token's text is never sent;
//   - /v1/completions parses special tokens in its prompt (as
//     llama-server): the rendered chat sent as a prompt is the same tokens.
func TestChatFamiliesServe(t *testing.T) {
	host.SetLog(io.Discard, host.LogNone)
	msgs := []Message{{"system", "Be brief."}, {"user", "Hi there"}, {"assistant", "Hello!"}, {"user", "What is 2+2?"}}
	for _, name := range synthtest.TinyFamilies {
		t.Run(name, func(t *testing.T) {
			model, cf := synthtest.FamilyChatModel(t, name)
			rigged := filepath.Join(t.TempDir(), "endturn.gguf")
			synthtest.EndTurn(t, model, rigged)
			specials, _ := vocabSpecials(t, rigged)
			family, familyIDs := map[string]int32{}, map[int32]bool{}
			for _, c := range cf.Control {
				family[c], familyIDs[specials[c]] = specials[c], true
			}
			text, err := host.ApplyChatTemplate(cf.Builtin, hostMessages(msgs), true)
			if err != nil {
				t.Fatal(err)
			}
			inText := 0
			for c := range family {
				inText += strings.Count(text, c)
			}
			if cf.Name == "phi3" {
				text = rstripAfter(text, specials)
			}
			for _, kind := range []string{"native", "llamacpp"} {
				eng, err := host.Load(rigged, host.LoadOptions{Engine: kind})
				if err != nil {
					t.Fatal(err)
				}
				defer eng.Close()
				sess, err := eng.NewSession(host.SessionConfig{NCtx: 512, Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer sess.Close()
				s := New(Config{ModelID: name, ChatTemplate: eng.Info().ChatTemplate, NCtx: 512,
					Sampling: host.SamplingParams{TopP: 1, RepeatPenalty: 1}}, eng, sess, nil)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go s.Run(ctx)
				hs := httptest.NewServer(s)
				defer hs.Close()

				v := eng.Vocab()
				want := expectChatTokens(t, v, specials, []string{text}, []bool{false})
				got, tmplName, err := s.chat.Tokens(v, msgs)
				if err != nil || tmplName != "model" || !slices.Equal(got, want) {
					t.Fatalf("%s: prompt tokens (template %q, %v)\n got %v\nwant %v", kind, tmplName, err, got, want)
				}
				if n := countIn(got, familyIDs); n != inText {
					t.Fatalf("%s: %d control tokens in the prompt, want the %d of the rendered text", kind, n, inText)
				}

				c := openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithMaxRetries(0))
				params := openai.ChatCompletionNewParams{Model: name, MaxTokens: openai.Int(8), Temperature: openai.Float(0)}
				for _, m := range msgs {
					switch m.Role {
					case "system":
						params.Messages = append(params.Messages, openai.SystemMessage(m.Content))
					case "user":
						params.Messages = append(params.Messages, openai.UserMessage(m.Content))
					default:
						params.Messages = append(params.Messages, openai.AssistantMessage(m.Content))
					}
				}
				cc, err := c.Chat.Completions.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				if ch := cc.Choices[0]; ch.FinishReason != "stop" || ch.Message.Content != "" || cc.Usage.CompletionTokens != 0 ||
					int(cc.Usage.PromptTokens) != len(want) {
					t.Fatalf("%s: chat: finish %q, content %q, usage %d+%d; want stop at %s at once after %d prompt tokens",
						kind, ch.FinishReason, ch.Message.Content, cc.Usage.PromptTokens, cc.Usage.CompletionTokens, cf.EOT, len(want))
				}
				if tn := cc.JSON.ExtraFields["edgellm"].Raw(); !strings.Contains(tn, `"chat_template":"model"`) {
					t.Fatalf("%s: edgellm extension %s: want chat_template model", kind, tn)
				}
				st := c.Chat.Completions.NewStreaming(ctx, params)
				var content strings.Builder
				finish := ""
				for st.Next() {
					for _, ch := range st.Current().Choices {
						content.WriteString(ch.Delta.Content)
						if ch.FinishReason != "" {
							finish = ch.FinishReason
						}
					}
				}
				if err := st.Err(); err != nil || finish != "stop" || content.String() != "" {
					t.Fatalf("%s: stream: finish %q, content %q, %v", kind, finish, content.String(), err)
				}

				cp, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(name),
					Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(text)}, MaxTokens: openai.Int(8), Temperature: openai.Float(0)})
				if err != nil {
					t.Fatal(err)
				}
				if ch := cp.Choices[0]; int(cp.Usage.PromptTokens) != len(want) || ch.FinishReason != "stop" || ch.Text != "" {
					t.Fatalf("%s: completion of the rendered chat: %d prompt tokens, finish %q, text %q; want %d, stop, empty",
						kind, cp.Usage.PromptTokens, ch.FinishReason, ch.Text, len(want))
				}
				t.Logf("SYNTHETIC %s, %s: %d prompt tokens, %d control; the reply stops at %s", name, kind, len(want), inText, cf.EOT)
			}
		})
	}
}
