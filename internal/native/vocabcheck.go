package native

import (
	"fmt"
	"reflect"

	"github.com/edgellm/edgellm/internal/gguf"
)

// A draft must tokenize exactly as its target: the same tokenizer model and
// pre-tokenizer, the same token texts and types in the same order, the same
// merges and the same special tokens. llama.cpp's speculative example checks
// the same (common_speculative_are_compatible: vocabulary type, BOS/EOS and
// the token texts); a draft with another vocabulary of the same size runs,
// but at acceptance 0, so it is refused with a line that names the first
// difference.

// vocabScalarKeys are the tokenizer settings a draft must share. A key absent
// from both files agrees.
var vocabScalarKeys = []string{
	"tokenizer.ggml.model",
	"tokenizer.ggml.pre",
	"tokenizer.ggml.bos_token_id",
	"tokenizer.ggml.eos_token_id",
	"tokenizer.ggml.eot_token_id",
	"tokenizer.ggml.eom_token_id",
	"tokenizer.ggml.unknown_token_id",
	"tokenizer.ggml.padding_token_id",
	"tokenizer.ggml.add_bos_token",
	"tokenizer.ggml.add_eos_token",
	"tokenizer.ggml.add_space_prefix",
}

// sameVocab returns nil when draft tokenizes as target does, else an error
// naming the first key or token that differs.
func sameVocab(target, draft *gguf.File) error {
	for _, k := range vocabScalarKeys {
		a, aok := target.Get(k)
		b, bok := draft.Get(k)
		switch {
		case !aok && !bok:
			continue
		case aok != bok:
			return fmt.Errorf("%s is %s in the target, %s in the draft", k, present(a, aok), present(b, bok))
		case a.String() != b.String():
			return fmt.Errorf("%s is %s in the target, %s in the draft", k, a.String(), b.String())
		}
	}
	for _, k := range []string{"tokenizer.ggml.tokens", "tokenizer.ggml.merges"} {
		a, aerr := target.GetStringArray(k)
		b, berr := draft.GetStringArray(k)
		if (aerr == nil) != (berr == nil) {
			return fmt.Errorf("%s: the target has %d, the draft %d", k, len(a), len(b))
		}
		if len(a) != len(b) {
			return fmt.Errorf("%s: %d in the target, %d in the draft", k, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				return fmt.Errorf("%s[%d] is %q in the target, %q in the draft", k, i, a[i], b[i])
			}
		}
	}
	const types = "tokenizer.ggml.token_type"
	a, aerr := target.GetArray(types)
	b, berr := draft.GetArray(types)
	if (aerr == nil) != (berr == nil) || (aerr == nil && !reflect.DeepEqual(a.Array(), b.Array())) {
		return fmt.Errorf("%s differs (special and control tokens are not the same tokens)", types)
	}
	return nil
}

func present(v gguf.Value, ok bool) string {
	if !ok {
		return "absent"
	}
	return v.String()
}
