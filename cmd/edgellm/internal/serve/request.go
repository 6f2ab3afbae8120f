package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
)

// Message is one chat turn of a /v1/chat/completions request.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is a decoded and validated completion or chat request: the fields
// of the OpenAI API the server implements. Nothing in it names a file, a
// model to load or a policy: a request can only ask for text.
type Request struct {
	Chat        bool
	Model       string
	Prompt      string    // completions
	Messages    []Message // chat
	Stream      bool
	MaxTokens   int // 0: up to the context
	Temperature float32
	TopP        float32
	Seed        uint64
	HasSeed     bool
	Stop        []string
	// IncludeUsage is stream_options.include_usage: a final chunk with usage.
	IncludeUsage bool
}

// wireRequest is the JSON shape; pointer fields tell absent from zero.
type wireRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Messages      json.RawMessage `json:"messages"`
	Stream        bool            `json:"stream"`
	MaxTokens     *int            `json:"max_tokens"`
	MaxCompletion *int            `json:"max_completion_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Seed          *int64          `json:"seed"`
	Stop          json.RawMessage `json:"stop"`
	N             *int            `json:"n"`
	Presence      *float64        `json:"presence_penalty"`
	Frequency     *float64        `json:"frequency_penalty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// unsupported are request fields the server refuses rather than ignores:
// each changes what a client gets back.
var unsupported = []string{"tools", "tool_choice", "functions", "function_call",
	"logprobs", "top_logprobs", "echo", "best_of", "suffix", "logit_bias",
	"response_format", "audio", "modalities", "prediction"}

// maxStops is OpenAI's limit on stop sequences.
const maxStops = 4

// DecodeRequest parses a request body. The error is an *APIError (400) that
// names the offending field.
func DecodeRequest(body []byte, chat bool) (*Request, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, badRequest("", "invalid JSON body: %v", err)
	}
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, badRequest(te.Field, "%s: got a JSON %s, want %s", te.Field, te.Value, jsonKind(te.Type))
		}
		return nil, badRequest("", "invalid JSON body: %v", err)
	}
	for _, k := range unsupported {
		if v, ok := fields[k]; ok && !isNullish(v) {
			return nil, badRequest(k, "%q is not supported by this server", k)
		}
	}
	r := &Request{Chat: chat, Model: w.Model, Stream: w.Stream, Temperature: 1, TopP: 1}
	if w.N != nil && *w.N != 1 {
		return nil, badRequest("n", "n=%d is not supported: this server returns one choice (n=1)", *w.N)
	}
	// The sampler has a repetition penalty (the server's --repeat-penalty)
	// but neither of OpenAI's additive penalties: refused, not ignored.
	for _, p := range []struct {
		name string
		v    *float64
	}{{"presence_penalty", w.Presence}, {"frequency_penalty", w.Frequency}} {
		if p.v != nil && *p.v != 0 {
			return nil, badRequest(p.name, "%s=%v is not supported by this server (only 0); the server's --repeat-penalty applies to every request", p.name, *p.v)
		}
	}
	if chat {
		if err := decodeMessages(w.Messages, r); err != nil {
			return nil, err
		}
	} else if err := decodePrompt(w.Prompt, r); err != nil {
		return nil, err
	}
	mt := w.MaxTokens
	if w.MaxCompletion != nil {
		mt = w.MaxCompletion
	}
	if mt != nil {
		if *mt < 1 {
			return nil, badRequest("max_tokens", "max_tokens=%d: want ≥ 1", *mt)
		}
		r.MaxTokens = *mt
	}
	if w.Temperature != nil {
		t := *w.Temperature
		if math.IsNaN(t) || t < 0 || t > 2 {
			return nil, badRequest("temperature", "temperature=%v: want 0..2", t)
		}
		r.Temperature = float32(t)
	}
	if w.TopP != nil {
		p := *w.TopP
		if math.IsNaN(p) || p <= 0 || p > 1 {
			return nil, badRequest("top_p", "top_p=%v: want (0, 1]", p)
		}
		r.TopP = float32(p)
	}
	if w.Seed != nil {
		r.Seed, r.HasSeed = uint64(*w.Seed), true
	}
	if err := decodeStop(w.Stop, r); err != nil {
		return nil, err
	}
	if w.StreamOptions != nil {
		if !w.Stream {
			return nil, badRequest("stream_options", "stream_options needs stream=true")
		}
		r.IncludeUsage = w.StreamOptions.IncludeUsage
	}
	return r, nil
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

func isNullish(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || bytes.Equal(v, []byte("null")) || bytes.Equal(v, []byte("false"))
}

func decodePrompt(raw json.RawMessage, r *Request) error {
	if isNullish(raw) {
		return badRequest("prompt", "prompt is required")
	}
	if err := json.Unmarshal(raw, &r.Prompt); err == nil {
		return nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return badRequest("prompt", "prompt must be a string (token arrays are not supported)")
	}
	if len(list) != 1 {
		return badRequest("prompt", "prompt has %d strings: this server takes one", len(list))
	}
	r.Prompt = list[0]
	return nil
}

// wireMessage accepts content as a string or as an array of text parts.
type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name"`
}

var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true}

func decodeMessages(raw json.RawMessage, r *Request) error {
	var ms []wireMessage
	if isNullish(raw) {
		return badRequest("messages", "messages is required")
	}
	if err := json.Unmarshal(raw, &ms); err != nil {
		return badRequest("messages", "messages must be an array of {role, content}: %v", err)
	}
	if len(ms) == 0 {
		return badRequest("messages", "messages is empty")
	}
	for i, m := range ms {
		if !roles[m.Role] {
			return badRequest("messages", "messages[%d].role %q: want system, developer, user or assistant", i, m.Role)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return badRequest("messages", "messages[%d].content: %v", i, err)
		}
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		r.Messages = append(r.Messages, Message{Role: role, Content: text})
	}
	return nil
}

func messageText(raw json.RawMessage) (string, error) {
	if isNullish(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("want a string or an array of text parts")
	}
	var b bytes.Buffer
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part type %q is not supported (text only)", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func decodeStop(raw json.RawMessage, r *Request) error {
	if isNullish(raw) {
		return nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one != "" {
			r.Stop = []string{one}
		}
		return nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return badRequest("stop", "stop must be a string or an array of strings")
	}
	if len(list) > maxStops {
		return badRequest("stop", "stop has %d sequences: at most %d", len(list), maxStops)
	}
	for _, s := range list {
		if s != "" {
			r.Stop = append(r.Stop, s)
		}
	}
	return nil
}
