package kernels

import "testing"

// TestChatTemplateFamilies: the template engine formats a conversation the
// way each native family's chat template does, recognising the template by
// the markers its Jinja text carries (the heads below are the families'
// templates cut after their markers, as tokenizer.chat_template holds them).
func TestChatTemplateFamilies(t *testing.T) {
	msgs := []ChatMessage{{"system", "be brief"}, {"user", "hi"}, {"assistant", "hello"}, {"user", "more"}}
	chatml := "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n"
	gemma := "<start_of_turn>user\nbe brief\n\nhi<end_of_turn>\n<start_of_turn>model\nhello<end_of_turn>\n<start_of_turn>user\nmore<end_of_turn>\n<start_of_turn>model\n"
	phi3 := "<|system|>\nbe brief<|end|>\n<|user|>\nhi<|end|>\n<|assistant|>\nhello<|end|>\n<|user|>\nmore<|end|>\n<|assistant|>\n"
	for _, tc := range []struct{ family, tmpl, want string }{
		{"qwen2.5", "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}", chatml},
		{"qwen3", "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- endif %}{%- set reasoning_content = '' %}<think>", chatml},
		{"smollm2", "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM<|im_end|>\n' }}", chatml},
		{"gemma2/gemma3", "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}", gemma},
		{"phi3", "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + '<|end|>\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}", phi3},
	} {
		got, err := ApplyChatTemplate(tc.tmpl, msgs, true)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v\nwant %q", tc.family, got, err, tc.want)
		}
	}
}
