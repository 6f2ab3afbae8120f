package precision

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

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
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := gguf.NewWriter(tmp)
	for _, kv := range f.KV {
		if kv.Key == MetadataKey {
			continue
		}
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	if err := w.AddKV(MetadataKey, gguf.String(string(data))); err != nil {
		return err
	}
	for _, t := range f.Tensors {
		if err := w.AddTensor(t.Name, t.Dims, t.Type); err != nil {
			return err
		}
	}
	for _, t := range f.Tensors {
		if _, err := io.Copy(w, io.NewSectionReader(in, f.AbsOffset(&t), t.Size)); err != nil {
			return fmt.Errorf("%s: tensor %s: %w", src, t.Name, err)
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	ok = true
	return nil
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
