package precision

import (
	"fmt"
	"slices"

	"github.com/edgellm/edgellm/internal/gguf"
)

// MetadataKey is the GGUF metadata key holding an embedded manifest (its
// JSON, as a string).
const MetadataKey = "edgellm.precision_manifest"

// Embed writes a copy of the GGUF at src to dst with m's JSON under
// MetadataKey (replacing any manifest already there): every other key and
// every tensor's bytes are copied unchanged. dst is written through a
// temporary file and a rename, so a failure leaves nothing behind. m must be
// for src's model.
func Embed(src, dst string, m *Manifest) error {
	f, err := gguf.Open(src)
	if err != nil {
		return err
	}
	if err := m.Check(Digest(f), m.Model.Layers); err != nil {
		return err
	}
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	return gguf.Rewrite(src, dst, func(kv []gguf.KV) []gguf.KV {
		kv = slices.DeleteFunc(kv, func(x gguf.KV) bool { return x.Key == MetadataKey })
		return append(kv, gguf.KV{Key: MetadataKey, Value: gguf.String(string(data))})
	})
}

// FromGGUF returns the manifest embedded in f (nil, nil when there is none),
// validated and checked against f's model.
func FromGGUF(f *gguf.File, layers int) (*Manifest, error) {
	v, found := f.Get(MetadataKey)
	if !found {
		return nil, nil
	}
	s, isStr := v.Str()
	if !isStr {
		return nil, fmt.Errorf("%s: %s is not a string", f.Name, MetadataKey)
	}
	m, err := Parse([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("%s: embedded manifest: %w", f.Name, err)
	}
	if err := m.Check(Digest(f), layers); err != nil {
		return nil, fmt.Errorf("%s: embedded manifest: %w", f.Name, err)
	}
	return m, nil
}
