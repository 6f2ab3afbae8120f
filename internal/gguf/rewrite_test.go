package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestRewrite: the edited metadata is what is written, every tensor's info
// and bytes are unchanged, and a failing rewrite leaves no file behind.
func TestRewrite(t *testing.T) {
	src := sharedtest.Stories260K(t)
	dst := filepath.Join(t.TempDir(), "out.gguf")
	err := Rewrite(src, dst, func(kv []KV) []KV {
		kv = slices.DeleteFunc(kv, func(x KV) bool { return x.Key == "general.name" })
		return append(kv, KV{Key: "test.added", Value: String("yes")})
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Get("general.name"); ok {
		t.Error("general.name was kept")
	}
	if v, ok := b.Get("test.added"); !ok {
		t.Error("test.added missing")
	} else if s, _ := v.Str(); s != "yes" {
		t.Errorf("test.added = %q", s)
	}
	if len(b.KV) != len(a.KV) {
		t.Errorf("%d keys, want %d (one dropped, one added)", len(b.KV), len(a.KV))
	}
	ra, _ := os.ReadFile(src)
	rb, _ := os.ReadFile(dst)
	if len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("%d tensors, want %d", len(b.Tensors), len(a.Tensors))
	}
	for i := range a.Tensors {
		ta, tb := &a.Tensors[i], &b.Tensors[i]
		if ta.Name != tb.Name || ta.Type != tb.Type || !slices.Equal(ta.Dims, tb.Dims) {
			t.Fatalf("tensor %d: %+v, want %+v", i, tb, ta)
		}
		if !bytes.Equal(ra[a.AbsOffset(ta):a.AbsOffset(ta)+ta.Size], rb[b.AbsOffset(tb):b.AbsOffset(tb)+tb.Size]) {
			t.Fatalf("tensor %s: bytes differ", ta.Name)
		}
	}

	// A key the writer refuses (a duplicate) fails the rewrite: nothing is
	// left behind.
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := Rewrite(src, bad, func(kv []KV) []KV { return append(kv, kv[0]) }); err == nil {
		t.Fatal("a duplicate key was accepted")
	}
	if ents, _ := os.ReadDir(filepath.Dir(bad)); len(ents) != 0 {
		t.Fatalf("a failed rewrite left %d file(s) behind", len(ents))
	}
}
