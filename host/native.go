package host

import "github.com/edgellm/edgellm/internal/native"

// The native engine: our own llama forward pass on ggml over weights we mmap
// and a KV arena we own (internal/native).
func init() {
	nativeLoader = func(path string, opts LoadOptions) (Engine, error) {
		return native.Load(path, native.Options{})
	}
}
