package kernels

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

func TestModelMetadata(t *testing.T) {
	m := loadStories(t)
	// The blueprint from ../shared/models/README.md.
	for _, tc := range []struct {
		name      string
		got, want int
	}{
		{"NVocab", m.NVocab(), 512},
		{"NEmbd", m.NEmbd(), 64},
		{"NLayer", m.NLayer(), 5},
		{"NHead", m.NHead(), 8},
		{"NHeadKV", m.NHeadKV(), 4},
		{"NCtxTrain", m.NCtxTrain(), 2048},
		{"NFF", m.NFF(), 172},
		{"Vocab.NVocab", m.Vocab().NVocab(), 512},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	if a := m.Arch(); a != "llama" {
		t.Errorf("Arch = %q", a)
	}
	if d := m.Desc(); !strings.HasPrefix(d, "llama") {
		t.Errorf("Desc = %q", d)
	}
	if ft := m.FileType(); ft != FileTypeAllF32 {
		t.Errorf("FileType = %v", ft)
	}
	// All-F32 weights: 4 bytes a parameter.
	if n, s := m.NParams(), m.Size(); n < 200_000 || n > 400_000 || s != 4*n {
		t.Errorf("NParams = %d, Size = %d", n, s)
	}
	if v, ok := m.Meta("llama.context_length"); !ok || v != "2048" {
		t.Errorf("Meta(llama.context_length) = %q, %v", v, ok)
	}
	if _, ok := m.Meta("no.such.key"); ok {
		t.Error("Meta(no.such.key) found")
	}
	keys := m.MetaKeys()
	if !slices.Contains(keys, "general.architecture") || !slices.Contains(keys, "tokenizer.ggml.model") {
		t.Errorf("MetaKeys = %v", keys)
	}
	v := m.Vocab()
	if v.Type() != VocabSPM || v.BOS() != 1 || v.EOS() != 2 || !v.IsEOG(v.EOS()) || v.IsEOG(100) || !v.AddBOS() {
		t.Errorf("vocab: type %v bos %d eos %d addBOS %v", v.Type(), v.BOS(), v.EOS(), v.AddBOS())
	}
	if _, err := v.Text(512); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Text(512) = %v", err)
	}
	if s, err := v.Text(v.BOS()); err != nil || s != "<s>" {
		t.Errorf("Text(BOS) = %q, %v", s, err)
	}
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadModelErrors(t *testing.T) {
	good, err := os.ReadFile(sharedtest.Stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		want error
		text string // in the message
	}{
		{"missing", filepath.Join(t.TempDir(), "nope.gguf"), fs.ErrNotExist, "nope.gguf"},
		{"directory", t.TempDir(), ErrNotGGUF, "directory"},
		{"text", writeFile(t, "a.txt", []byte("hello, not a model\n")), ErrNotGGUF, "magic"},
		{"empty", writeFile(t, "e.gguf", nil), ErrNotGGUF, "too short"},
		{"v1", sharedtest.Path(t, "models/tinyllamas-stories-260k-f32.v1.gguf"), ErrNotGGUF, "version 1"},
		{"counts", writeFile(t, "c.gguf", append([]byte("GGUF\x03\x00\x00\x00"), 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0)), ErrNotGGUF, "cannot fit"},
		// A valid header over a truncated body: only llama.cpp can tell.
		{"truncated", writeFile(t, "t.gguf", good[:len(good)/2]), ErrLoad, "t.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := LoadModel(tc.path, ModelParams{})
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			var pe *PathError
			if !errors.Is(err, tc.want) || !errors.As(err, &pe) || pe.Path != tc.path || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("LoadModel = %v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
}

func TestNewContextValidation(t *testing.T) {
	m := loadStories(t)
	for _, tc := range []struct {
		name string
		p    ContextParams
		text string
	}{
		{"ctx-above-train", ContextParams{NCtx: 4096}, "training context 2048"},
		{"negative", ContextParams{NBatch: -1}, "negative"},
		{"kv-type", ContextParams{TypeK: "q3"}, "K cache: invalid argument: unknown KV type"},
		// Head size 8 cannot hold a 32-element quantization block.
		{"kv-q8-head8", ContextParams{TypeK: engine.KVQ8_0}, "multiple of 32"},
		{"kv-q4-v", ContextParams{TypeV: engine.KVQ4_0}, "multiple of 32"},
		{"seq-max", ContextParams{NSeqMax: 100000}, "n_seq_max"},
		{"fa-mode", ContextParams{FlashAttn: 7}, "flash attention"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewContext(m, tc.p)
			if err == nil {
				c.Close()
				t.Fatal("created")
			}
			if !errors.Is(err, ErrInvalidArg) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("NewContext = %v, want ErrInvalidArg mentioning %q", err, tc.text)
			}
		})
	}
	c := newCtx(t, m, ContextParams{NCtx: 300, NBatch: 1000, NSeqMax: 2, KVUnified: true, Threads: 1, ThreadsBatch: 2})
	if c.NCtx() != 512 || c.NBatch() != 300 || c.NUBatch() != 300 || c.NSeqMax() != 2 || c.NCtxSeq() != 512 {
		t.Errorf("NCtx %d NBatch %d NUBatch %d NSeqMax %d NCtxSeq %d", c.NCtx(), c.NBatch(), c.NUBatch(), c.NSeqMax(), c.NCtxSeq())
	}
	if th, tb := c.Threads(); th != 1 || tb != 2 {
		t.Errorf("Threads = %d, %d", th, tb)
	}
	if err := c.SetThreads(2, 1); err != nil {
		t.Fatal(err)
	}
	if th, tb := c.Threads(); th != 2 || tb != 1 {
		t.Errorf("Threads after SetThreads = %d, %d", th, tb)
	}
	if k, v := c.KVTypes(); k != engine.KVF16 || v != engine.KVF16 {
		t.Errorf("KVTypes = %s, %s", k, v)
	}
}

// TestVocabOnly loads only the tokenizer: Vocab works, contexts are refused.
func TestVocabOnly(t *testing.T) {
	m, err := LoadModel(sharedtest.Stories260K(t), ModelParams{VocabOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.VocabOnly() || m.Vocab().NVocab() != 512 {
		t.Fatalf("vocab-only model: VocabOnly %v NVocab %d", m.VocabOnly(), m.Vocab().NVocab())
	}
	toks, err := m.Vocab().Tokenize("Once upon a time", true, false)
	if err != nil || len(toks) < 3 || toks[0] != 1 {
		t.Fatalf("Tokenize = %v, %v", toks, err)
	}
	if _, err := NewContext(m, ContextParams{}); !errors.Is(err, ErrInvalidArg) {
		t.Fatalf("NewContext on vocab-only model = %v", err)
	}
}

// TestMmapOff checks that a model read without mmap decodes identically.
func TestMmapOff(t *testing.T) {
	path := sharedtest.Stories260K(t)
	m, err := LoadModel(path, ModelParams{NoMmap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := newCtx(t, m, ContextParams{NCtx: 256})
	b := newBatch(t, 8, 1)
	got := greedy(t, c, b, []int32{1}, 0, 24)
	c2 := newCtx(t, loadStories(t), ContextParams{NCtx: 256})
	b2 := newBatch(t, 8, 1)
	want := greedy(t, c2, b2, []int32{1}, 0, 24)
	if !slices.Equal(got, want) {
		t.Fatalf("no-mmap tokens %v\nmmap tokens    %v", got, want)
	}
	c.Close()
}
