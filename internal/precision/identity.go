package precision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/edgellm/edgellm/internal/gguf"
)

// Digest is the model identity of a GGUF file: "sha256:<hex>" over the
// architecture, its hyper-parameters (every "<arch>." key), the vocabulary
// (tokenizer.ggml.tokens) and the tensor names and shapes, but not the
// tensor types, the data or the general.* keys. Every precision of one
// model, and a file with an embedded manifest, have the same digest; a
// model with other shapes or another vocabulary has another.
func Digest(f *gguf.File) string {
	h := sha256.New()
	arch := f.Arch()
	fmt.Fprintf(h, "arch=%s\n", arch)
	var keys []string
	for _, kv := range f.KV {
		if strings.HasPrefix(kv.Key, arch+".") {
			keys = append(keys, kv.Key)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, _ := f.Get(k)
		fmt.Fprintf(h, "%s=%v\n", k, v.Interface())
	}
	if toks, err := f.GetStringArray("tokenizer.ggml.tokens"); err == nil {
		fmt.Fprintf(h, "tokens=%d\n", len(toks))
		for _, t := range toks {
			fmt.Fprintf(h, "%q\n", t)
		}
	}
	names := make([]int, len(f.Tensors))
	for i := range names {
		names[i] = i
	}
	sort.Slice(names, func(a, b int) bool { return f.Tensors[names[a]].Name < f.Tensors[names[b]].Name })
	for _, i := range names {
		t := &f.Tensors[i]
		fmt.Fprintf(h, "tensor %s %v\n", t.Name, t.Dims)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
