package gguf

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Rewrite writes a copy of the GGUF at src to dst with its metadata passed
// through edit, which gets a copy of src's key/value pairs in file order and
// returns the ones to write; tensor infos and every tensor's bytes are
// copied unchanged. dst is written to a temporary file in its directory,
// synced and renamed (mode 0644), so a failure leaves nothing behind.
func Rewrite(src, dst string, edit func(kv []KV) []KV) error {
	return RewriteZeroing(src, dst, edit, nil)
}

// RewriteZeroing is Rewrite with the bytes of every tensor zero names
// written as zeros (all-zero bytes decode to zero in every ggml type); a
// nil zero copies every tensor.
func RewriteZeroing(src, dst string, edit func(kv []KV) []KV, zero func(name string) bool) error {
	f, err := Open(src)
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
	w := NewWriter(tmp)
	for _, kv := range edit(slices.Clone(f.KV)) {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	for _, t := range f.Tensors {
		if err := w.AddTensor(t.Name, t.Dims, t.Type); err != nil {
			return err
		}
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		var r io.Reader = io.NewSectionReader(in, f.AbsOffset(t), t.Size)
		if zero != nil && zero(t.Name) {
			r = io.LimitReader(zeroReader{}, t.Size)
		}
		if _, err := io.Copy(w, r); err != nil {
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

// zeroReader reads zero bytes forever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
