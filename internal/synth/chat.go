package synth

import (
	"fmt"
	"slices"

	"github.com/edgellm/edgellm/internal/gguf"
)

// Chat formats of the families, as an instruct model's converted GGUF
// carries them: tokenizer.chat_template (the Jinja text of the family's
// format; llama.cpp matches it against its built-in templates by its
// markers), the control tokens the template writes, in the vocabulary with
// token type CONTROL, and the end-of-turn token the model stops at
// (tokenizer.ggml.eot_token_id; eos_token_id too where the instruct model's
// EOS is its end of turn). The shared vocabularies lack these tokens
// (GPT-2's, Llama's, stories260K's), so Write appends the missing ones:
// n_vocab, and token_embd/output with it, grows by their number.
//
// The templates are SYNTHETIC: written here in each family's format, not
// copied from a model; each renders as llama.cpp's built-in template of the
// family (TestChatFamilies).

// ChatFamily is one family's chat format.
type ChatFamily struct {
	Name     string
	Template string   // tokenizer.chat_template
	Control  []string // control tokens the template writes
	EOT      string   // the end-of-turn token
	EOSIsEOT bool     // eos_token_id is the end of turn too (Qwen2.5, SmolLM2 instruct)
	// Builtin is llama.cpp's built-in template name Template must render as.
	Builtin string
}

// chatml is ChatML, the format of Qwen2.5, Qwen3 and SmolLM2; system
// supplies the default system turn.
func chatml(system string) string {
	return "{%- if messages[0]['role'] != 'system' %}{{- '<|im_start|>system\\n" + system + "<|im_end|>\\n' }}{%- endif %}" +
		"{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}" +
		"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
}

// ChatFamilies are the chat formats of the synthetic shapes (Shape.Chat).
var ChatFamilies = map[string]ChatFamily{
	"qwen2.5": {Name: "qwen2.5", Template: chatml("You are a helpful assistant."),
		Control: []string{"<|im_start|>", "<|im_end|>"}, EOT: "<|im_end|>", EOSIsEOT: true, Builtin: "chatml"},
	// Qwen3's format is ChatML with an empty reasoning block in the reply.
	"qwen3": {Name: "qwen3", Template: "{%- set reasoning_content = '' %}" + chatml("You are a helpful assistant.") +
		"{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}",
		Control: []string{"<|im_start|>", "<|im_end|>"}, EOT: "<|im_end|>", EOSIsEOT: true, Builtin: "chatml"},
	"smollm2": {Name: "smollm2", Template: chatml("You are a helpful AI assistant."),
		Control: []string{"<|im_start|>", "<|im_end|>"}, EOT: "<|im_end|>", EOSIsEOT: true, Builtin: "chatml"},
	// Gemma 2 and 3: a system turn is folded into the first user turn; the
	// assistant is "model".
	"gemma": {Name: "gemma", Template: "{{ bos_token }}{%- for message in messages %}" +
		"{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}" +
		"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{%- endfor %}" +
		"{%- if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{%- endif %}",
		Control: []string{"<start_of_turn>", "<end_of_turn>"}, EOT: "<end_of_turn>", Builtin: "gemma"},
	// Phi-3: a vocabulary that has its own template (Phi-3's does) keeps it.
	"phi3": {Name: "phi3", Template: "{% for message in messages %}{{ '<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>' + '\\n' }}{% endfor %}" +
		"{% if add_generation_prompt %}{{ '<|assistant|>' + '\\n' }}{% endif %}",
		Control: []string{"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"}, EOT: "<|end|>", Builtin: "phi3"},
}

// Token types of tokenizer.ggml.token_type (llama_token_type).
const (
	tokenNormal  = 1
	tokenControl = 3
	tokenUnused  = 5
)

// vocabPad is the multiple a vocabulary with added tokens is padded to.
const vocabPad = 64

// addChat adds family cf's chat format to a vocabulary's tokenizer.* KVs:
// the template (unless the vocabulary has one), the control tokens it
// lacks, appended with type CONTROL, and the end-of-turn ids. It returns
// the KVs and the new token count.
func addChat(kvs []gguf.KV, cf ChatFamily) ([]gguf.KV, int, error) {
	idx := func(key string) int {
		return slices.IndexFunc(kvs, func(kv gguf.KV) bool { return kv.Key == key })
	}
	set := func(key string, v gguf.Value) {
		if i := idx(key); i >= 0 {
			kvs[i].Value = v
		} else {
			kvs = append(kvs, gguf.KV{Key: key, Value: v})
		}
	}
	ti := idx("tokenizer.ggml.tokens")
	if ti < 0 {
		return nil, 0, fmt.Errorf("vocabulary has no tokenizer.ggml.tokens")
	}
	base, _ := kvs[ti].Value.Strs()
	tokens := slices.Clone(base)
	var types []int32
	if i := idx("tokenizer.ggml.token_type"); i >= 0 {
		t, ok := kvs[i].Value.Int32Array()
		if !ok {
			return nil, 0, fmt.Errorf("vocabulary: tokenizer.ggml.token_type is not an int32 array")
		}
		types = slices.Clone(t)
	} else {
		types = slices.Repeat([]int32{tokenNormal}, len(tokens))
	}
	var scores []float32
	si := idx("tokenizer.ggml.scores")
	if si >= 0 {
		s, ok := kvs[si].Value.Float32Array()
		if !ok {
			return nil, 0, fmt.Errorf("vocabulary: tokenizer.ggml.scores is not a float32 array")
		}
		scores = slices.Clone(s)
	}
	for _, c := range cf.Control {
		if slices.Contains(tokens, c) {
			continue // the vocabulary's own (a converted one is right)
		}
		tokens, types = append(tokens, c), append(types, tokenControl)
		if si >= 0 {
			scores = append(scores, 0)
		}
	}
	// Converted models list padding tokens up to the embedding's rows,
	// which are a round number (Qwen2.5 151936, Phi-3 32064): pad what was
	// added to a multiple of vocabPad, as UNUSED "[PADn]" tokens (as
	// convert_hf_to_gguf.py names them), so the output matrix's rows still
	// split into ggml's repacked row groups.
	if added := len(tokens) > len(base); added {
		for len(tokens)%vocabPad != 0 {
			tokens, types = append(tokens, fmt.Sprintf("[PAD%d]", len(tokens))), append(types, tokenUnused)
			if si >= 0 {
				scores = append(scores, 0)
			}
		}
	}
	kvs[ti].Value = gguf.Strings(tokens)
	set("tokenizer.ggml.token_type", gguf.Int32s(types))
	if si >= 0 {
		kvs[si].Value = gguf.Float32s(scores)
	}
	eot := slices.Index(tokens, cf.EOT)
	set("tokenizer.ggml.eot_token_id", gguf.Uint32(uint32(eot)))
	if cf.EOSIsEOT {
		set("tokenizer.ggml.eos_token_id", gguf.Uint32(uint32(eot)))
	}
	if idx("tokenizer.chat_template") < 0 {
		set("tokenizer.chat_template", gguf.String(cf.Template))
	}
	return kvs, len(tokens), nil
}
