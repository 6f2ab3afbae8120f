// Package synthtest writes SYNTHETIC models for tests (random weights in a
// given shape, a real vocabulary), once per test binary per shape and type,
// into one temporary directory the test binary's TestMain removes:
//
//	var models synthtest.Cache
//	func TestMain(m *testing.M) { code := m.Run(); models.Close(); os.Exit(code) }
//	path := models.Model(t, shape, gguf.Q4_0, vocabPath)
//
// Every model has seed 1: two types of one shape share their base weights,
// as a real quantization ladder does. A Cache is safe for concurrent use.
package synthtest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/synth"
)

// Cache holds the models written so far. The zero Cache is ready to use.
type Cache struct {
	mu    sync.Mutex
	dir   string
	files map[string]string
}

// Model writes (the first time it is asked for) a SYNTHETIC model of shape
// sh with weights of type typ and the tokenizer of the GGUF at vocab, and
// returns its path.
func (c *Cache) Model(t testing.TB, sh synth.Shape, typ gguf.Type, vocab string) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	key := sh.Name + "-" + typ.String() + "-" + filepath.Base(vocab)
	if p, ok := c.files[key]; ok {
		return p
	}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "edgellm-synthtest-")
		if err != nil {
			t.Fatal(err)
		}
		c.dir, c.files = d, map[string]string{}
	}
	p := filepath.Join(c.dir, key+".gguf")
	if err := synth.Write(context.Background(), synth.Options{Shape: sh, Type: typ, VocabPath: vocab, Seed: 1, Out: p}, nil); err != nil {
		os.Remove(p)
		t.Fatal(err)
	}
	c.files[key] = p
	return p
}

// Close removes every model the cache wrote.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir != "" {
		os.RemoveAll(c.dir)
		c.dir, c.files = "", nil
	}
}

// TinyFamilies are synth's "<family>-tiny" shapes: every feature of each
// native model family on, a few layers.
var TinyFamilies = []string{"qwen2-tiny", "qwen3-tiny", "gemma2-tiny", "gemma3-tiny", "phi3-tiny", "smollm2-tiny"}

// Named is the model of synth's shape name (Model): with stories260K's
// 512-token vocabulary (fast), or with the shape's own when it names one
// (phi3-tiny: llama.cpp looks Phi-3's special tokens up by name in a model
// named phi3).
func (c *Cache) Named(t testing.TB, name string, typ gguf.Type) string {
	t.Helper()
	sh, ok := synth.Shapes[name]
	if !ok {
		t.Fatalf("no synth shape %s", name)
	}
	vocab := sharedtest.Stories260K(t)
	if sh.Vocab != "" {
		vocab = sharedtest.Path(t, sh.Vocab)
	}
	return c.Model(t, sh, typ, vocab)
}
