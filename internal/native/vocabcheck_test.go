package native

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestDraftVocabByContent: a draft whose vocabulary has the target's size
// but not its content (two token texts swapped, another BOS id, another
// token type) is refused in one line naming what differs; the real
// layer-skip draft, whose vocabulary is the target's, is accepted.
func TestDraftVocabByContent(t *testing.T) {
	e := loadSpecTarget(t)
	src := filepath.Join(sharedtest.Dir(), "models", "derived", "stories260K-first4layers.gguf")
	if d, err := LoadDraft(src, e); err != nil {
		t.Fatalf("the real draft: %v", err)
	} else {
		d.Close()
	}
	rewrite := func(name string, edit func(kv []gguf.KV)) string {
		dst := filepath.Join(t.TempDir(), name+".gguf")
		if err := gguf.Rewrite(src, dst, func(kv []gguf.KV) []gguf.KV {
			kv = slices.Clone(kv)
			edit(kv)
			return kv
		}); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	set := func(key string, f func(v gguf.Value) gguf.Value) func([]gguf.KV) {
		return func(kv []gguf.KV) {
			for i := range kv {
				if kv[i].Key == key {
					kv[i].Value = f(kv[i].Value)
					return
				}
			}
			t.Fatalf("%s has no %s", src, key)
		}
	}
	for _, tc := range []struct {
		name, want string
		edit       func([]gguf.KV)
	}{
		{"swapped", "tokenizer.ggml.tokens[300]", set("tokenizer.ggml.tokens", func(v gguf.Value) gguf.Value {
			s, _ := v.Strs()
			s = slices.Clone(s)
			s[300], s[301] = s[301], s[300]
			return gguf.Strings(s)
		})},
		{"bos", "tokenizer.ggml.bos_token_id", set("tokenizer.ggml.bos_token_id", func(gguf.Value) gguf.Value { return gguf.Uint32(5) })},
		{"types", "tokenizer.ggml.token_type", set("tokenizer.ggml.token_type", func(v gguf.Value) gguf.Value {
			a, _ := v.Int32Array()
			a = slices.Clone(a)
			a[10] = 3 // control
			return gguf.Int32s(a)
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := LoadDraft(rewrite(tc.name, tc.edit), e)
			if err == nil {
				d.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line naming %s", err, tc.want)
			}
		})
	}
}
