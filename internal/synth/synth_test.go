package synth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

func spmVocab(t *testing.T) string { return sharedtest.Path(t, DefaultVocab) }

func writeTiny(t *testing.T, s Shape, typ gguf.Type, seed uint64, workers int) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "tiny.gguf")
	err := Write(context.Background(), Options{Shape: s, Type: typ, VocabPath: spmVocab(t), Seed: seed, Out: out, Workers: workers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWriteTinyEachType(t *testing.T) {
	s := Shapes["tiny"]
	for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.Q8_0, gguf.Q5_0, gguf.Q4_0, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
		t.Run(typ.String(), func(t *testing.T) {
			f, err := gguf.Open(writeTiny(t, s, typ, 1, 2))
			if err != nil {
				t.Fatal(err)
			}
			ft, _ := FileType(typ)
			want := map[string]uint64{
				"llama.block_count": 4, "llama.embedding_length": 256, "llama.attention.head_count": 8,
				"llama.attention.head_count_kv": 4, "llama.feed_forward_length": 512, "llama.vocab_size": 32000,
				"llama.context_length": 2048, "llama.rope.dimension_count": 32, gguf.KeyFileType: uint64(ft),
			}
			for k, w := range want {
				if got, err := f.GetUint(k); err != nil || got != w {
					t.Errorf("%s = %d, %v; want %d", k, got, err, w)
				}
			}
			if m, _ := f.GetString("tokenizer.ggml.model"); m != "llama" || f.Arch() != "llama" {
				t.Errorf("tokenizer %q arch %q", m, f.Arch())
			}
			if n, _ := f.GetArrayLen("tokenizer.ggml.scores"); n != 32000 {
				t.Errorf("scores: %d", n)
			}
			if len(f.Tensors) != 4*9+3 {
				t.Fatalf("%d tensors", len(f.Tensors))
			}
			checks := []struct {
				name string
				dims []int64
				typ  gguf.Type
			}{
				{"token_embd.weight", []int64{256, 32000}, typ},
				{"output.weight", []int64{256, 32000}, typ},
				{"output_norm.weight", []int64{256}, gguf.F32},
				{"blk.3.attn_k.weight", []int64{256, 128}, typ},
				{"blk.0.attn_output.weight", []int64{256, 256}, typ},
				{"blk.2.ffn_down.weight", []int64{512, 256}, typ},
				{"blk.1.ffn_norm.weight", []int64{256}, gguf.F32},
			}
			for _, c := range checks {
				ti, ok := f.Tensor(c.name)
				if !ok || ti.Type != c.typ || len(ti.Dims) != len(c.dims) || ti.Dims[0] != c.dims[0] || ti.Dims[len(ti.Dims)-1] != c.dims[len(c.dims)-1] {
					t.Errorf("%s = %+v, want %v %s", c.name, ti, c.dims, c.typ)
				}
			}
		})
	}
}

func fileHash(t *testing.T, path string) string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	h := sha256.New()
	io.Copy(h, fh)
	return hex.EncodeToString(h.Sum(nil))
}

// TestDeterministic: same seed → same bytes, whatever the worker count; a
// different seed → different bytes.
func TestDeterministic(t *testing.T) {
	s := Shapes["tiny"]
	a := fileHash(t, writeTiny(t, s, gguf.Q4_0, 7, 1))
	b := fileHash(t, writeTiny(t, s, gguf.Q4_0, 7, 3))
	c := fileHash(t, writeTiny(t, s, gguf.Q4_0, 8, 2))
	if a != b || a == c {
		t.Errorf("seed 7 (1 worker) %s, seed 7 (3 workers) %s, seed 8 %s", a, b, c)
	}
}

func TestOptionsValidate(t *testing.T) {
	good := Options{Shape: Shapes["tiny"], Type: gguf.Q4_0, Out: "x.gguf"}
	odd := Shapes["tiny"]
	odd.NEmbd = 96 // a multiple of 32 but not of 256
	gqa := Shapes["tiny"]
	gqa.NHeadKV = 3
	tests := []struct {
		name string
		mod  func(o *Options)
		msg  string
	}{
		{"ok", func(o *Options) {}, ""},
		{"imatrix type", func(o *Options) { o.Type = gguf.IQ2_XXS }, "not supported"},
		{"q4_k row 96", func(o *Options) { o.Shape, o.Type = odd, gguf.Q4_K }, "block size 256"},
		{"heads", func(o *Options) { o.Shape = gqa }, "n-head-kv"},
		{"no out", func(o *Options) { o.Out = "" }, "output"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.mod(&o)
			err := o.Validate()
			if (tc.msg == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
				t.Errorf("err = %v, want %q", err, tc.msg)
			}
		})
	}
}

func TestLlama3RopeFactors(t *testing.T) {
	f := llama3RopeFactors(64, 500000)
	if len(f) != 32 || f[0] != 1 || f[31] != 32 {
		t.Fatalf("factors %v", f)
	}
	for i := 1; i < len(f); i++ {
		if f[i] < f[i-1] {
			t.Fatalf("not monotonic at %d: %v", i, f)
		}
	}
}

// TestTypeTraitsMatchGGML: gguf's pure-Go block/type sizes agree with the
// compiled ggml for every type.
func TestTypeTraitsMatchGGML(t *testing.T) {
	for _, typ := range gguf.Types() {
		g := kernels.GGMLType(typ)
		if !g.Valid() || g.BlockSize() != int64(typ.BlockSize()) || g.TypeSize() != int64(typ.TypeSize()) {
			t.Errorf("%s: gguf %d/%d, ggml %d/%d", typ, typ.BlockSize(), typ.TypeSize(), g.BlockSize(), g.TypeSize())
		}
	}
	for _, bad := range []gguf.Type{4, 5, 31, 36} {
		if kernels.GGMLType(bad).Valid() || bad.Valid() {
			t.Errorf("type %d valid", bad)
		}
	}
}

// TestLlamaCppRunsSynthetic loads synthetic models in llama.cpp and decodes
// a few greedy steps: every logit must be finite and the logits must vary.
func TestLlamaCppRunsSynthetic(t *testing.T) {
	l3 := Shapes["tiny"]
	l3.Name, l3.TiedEmbeddings, l3.Llama3Rope, l3.RopeBase = "tiny-llama3", true, true, 500000
	tests := []struct {
		shape Shape
		typ   gguf.Type
	}{
		{Shapes["tiny"], gguf.Q4_0},
		{Shapes["tiny"], gguf.F16},
		{Shapes["tiny"], gguf.Q4_K},
		{l3, gguf.Q8_0},
	}
	for _, tc := range tests {
		t.Run(tc.shape.Name+"-"+tc.typ.String(), func(t *testing.T) {
			path := writeTiny(t, tc.shape, tc.typ, 3, 2)
			m, err := kernels.LoadModel(path, kernels.ModelParams{})
			if err != nil {
				t.Fatal(err)
			}
			if m.NLayer() != tc.shape.NLayer || m.NEmbd() != tc.shape.NEmbd || m.NVocab() != 32000 || m.NHeadKV() != tc.shape.NHeadKV {
				t.Fatalf("llama.cpp sees %d layers, n_embd %d, vocab %d, kv heads %d", m.NLayer(), m.NEmbd(), m.NVocab(), m.NHeadKV())
			}
			c := newContextOrTimeout(t, m, kernels.ContextParams{NCtx: 64, NBatch: 8, Threads: 2})
			defer m.Close()
			defer c.Close()
			b, err := kernels.NewBatch(8, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			logits := make([]float32, m.NVocab())
			tok := int32(1) // BOS of llama-spm
			distinct := map[int32]bool{}
			for pos := 0; pos < 8; pos++ {
				b.Clear()
				b.Add(tok, pos, 0, true)
				if err := c.Decode(b); err != nil {
					t.Fatalf("decode at %d: %v", pos, err)
				}
				if err := c.Logits(0, logits); err != nil {
					t.Fatal(err)
				}
				lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
				for i, v := range logits {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("step %d: logit[%d] = %v", pos, i, v)
					}
					lo, hi = min(lo, v), max(hi, v)
				}
				if !(hi-lo > 0.1) || hi-lo > 1000 {
					t.Fatalf("step %d: logits span [%g, %g]", pos, lo, hi)
				}
				tok = kernels.Argmax(logits)
				distinct[tok] = true
			}
			t.Logf("8 greedy steps, %d distinct tokens", len(distinct))
		})
	}
}

var newContextHung bool

// newContextOrTimeout fails the test, instead of hanging the package, if
// kernels.NewContext does not return (it deadlocked at the time of writing:
// NewContext holds Model.mu and contextParams → headDimK → Meta locks it
// again). On timeout the Model is deliberately leaked: Close would block too.
func newContextOrTimeout(t *testing.T, m *kernels.Model, p kernels.ContextParams) *kernels.Context {
	t.Helper()
	if newContextHung {
		t.Fatal("kernels.NewContext hung in an earlier subtest (Model.mu deadlock in kernels?)")
	}
	type result struct {
		c   *kernels.Context
		err error
	}
	ch := make(chan result, 1)
	go func() { c, err := kernels.NewContext(m, p); ch <- result{c, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			m.Close()
			t.Fatal(r.err)
		}
		return r.c
	case <-time.After(60 * time.Second):
		newContextHung = true
		t.Fatal("kernels.NewContext did not return within 60 s (Model.mu deadlock in kernels?)")
		return nil
	}
}
