package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

func TestOpenSharedModels(t *testing.T) {
	tests := []struct {
		rel       string
		version   uint32
		nTensors  int
		ctx       uint64
		embdType  Type
		ffnUpType Type
		nFF       int64
	}{
		{"models/stories260K.gguf", 3, 48, 2048, F32, F32, 172},
		{"models/tinyllamas-stories-260k-f32.v1.gguf", 1, 48, 512, F32, F32, 172},
		{"models/derived/stories260K-ff192-f32.gguf", 3, 48, 2048, F32, F32, 192},
		{"models/derived/stories260K-ff192-Q8_0.gguf", 3, 48, 2048, Q8_0, Q8_0, 192},
		{"models/derived/stories260K-ff192-Q5_0.gguf", 3, 48, 2048, Q5_0, Q5_0, 192},
		{"models/derived/stories260K-ff192-Q4_0.gguf", 3, 48, 2048, Q4_0, Q4_0, 192},
		{"models/derived/stories260K-first4layers.gguf", 3, 39, 2048, F32, F32, 172},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.rel), func(t *testing.T) {
			path := sharedtest.Path(t, tc.rel)
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.Version != tc.version || len(f.Tensors) != tc.nTensors || f.Arch() != "llama" {
				t.Fatalf("version %d, %d tensors, arch %q; want %d, %d, llama", f.Version, len(f.Tensors), f.Arch(), tc.version, tc.nTensors)
			}
			want := map[string]uint64{
				"llama.context_length":          tc.ctx,
				"llama.embedding_length":        64,
				"llama.attention.head_count":    8,
				"llama.feed_forward_length":     uint64(tc.nFF),
				"llama.attention.head_count_kv": 4,
			}
			if strings.Contains(tc.rel, "first4") {
				want["llama.block_count"] = 4
			} else {
				want["llama.block_count"] = 5
			}
			for k, w := range want {
				if got, err := f.GetUint(k); err != nil || got != w {
					t.Errorf("%s = %d, %v; want %d", k, got, err, w)
				}
			}
			if n, err := f.GetArrayLen("tokenizer.ggml.tokens"); err != nil || n != 512 {
				t.Errorf("tokens: %d, %v; want 512", n, err)
			}
			if eps, err := f.GetFloat("llama.attention.layer_norm_rms_epsilon"); err != nil || eps <= 0 || eps > 1e-3 {
				t.Errorf("rms eps %g, %v", eps, err)
			}
			emb, ok := f.Tensor("token_embd.weight")
			if !ok || emb.Type != tc.embdType || len(emb.Dims) != 2 || emb.Dims[0] != 64 || emb.Dims[1] != 512 {
				t.Fatalf("token_embd.weight = %+v", emb)
			}
			up, ok := f.Tensor("blk.0.ffn_up.weight")
			if !ok || up.Type != tc.ffnUpType || up.Dims[0] != 64 || up.Dims[1] != tc.nFF {
				t.Fatalf("blk.0.ffn_up.weight = %+v", up)
			}
			if up.Size != tc.ffnUpType.RowSize(64)*tc.nFF {
				t.Errorf("ffn_up size %d", up.Size)
			}
			// Tensors tile the data section: the furthest one ends at EOF.
			var end int64
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				end = max(end, f.AbsOffset(ti)+ti.Size)
				if f.AbsOffset(ti)%f.Alignment != 0 {
					t.Errorf("%s not aligned", ti.Name)
				}
			}
			if end != f.FileSize {
				t.Errorf("tensors end at %d, file size %d", end, f.FileSize)
			}
			// Check one tensor's bytes are where we say: the norm weights of
			// stories260K are not all zero and are finite float32.
			if tc.embdType == F32 {
				checkF32Tensor(t, path, f, "blk.0.attn_norm.weight")
			}
		})
	}
}

func checkF32Tensor(t *testing.T, path string, f *File, name string) {
	t.Helper()
	ti, _ := f.Tensor(name)
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	b := make([]byte, ti.Size)
	if _, err := fh.ReadAt(b, f.AbsOffset(ti)); err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for i := 0; i < len(b); i += 4 {
		bits := uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
		if bits&0x7f800000 == 0x7f800000 {
			t.Fatalf("%s[%d] is not finite", name, i/4)
		}
		if bits != 0 {
			nonzero++
		}
	}
	if nonzero == 0 {
		t.Fatalf("%s is all zero: wrong offset?", name)
	}
}

func TestOpenVocabOnly(t *testing.T) {
	tests := []struct {
		name, arch, model string
		tokens            int
	}{
		{"ggml-vocab-llama-spm.gguf", "llama", "llama", 32000},
		{"ggml-vocab-gpt-2.gguf", "gpt2", "gpt2", 50257},
		{"ggml-vocab-bert-bge.gguf", "bert", "bert", 30522},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Open(sharedtest.Path(t, "models/vocab/"+tc.name))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Tensors) != 0 || f.Arch() != tc.arch {
				t.Fatalf("%d tensors, arch %q", len(f.Tensors), f.Arch())
			}
			if m, err := f.GetString("tokenizer.ggml.model"); err != nil || m != tc.model {
				t.Errorf("tokenizer model %q, %v", m, err)
			}
			toks, err := f.GetStringArray("tokenizer.ggml.tokens")
			if err != nil || len(toks) != tc.tokens {
				t.Fatalf("tokens: %d, %v; want %d", len(toks), err, tc.tokens)
			}
		})
	}
}

func TestAccessorErrors(t *testing.T) {
	f, err := Open(sharedtest.Stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.GetString("no.such.key")
	var ke *KeyError
	if !errors.As(err, &ke) || !errors.Is(err, ErrKeyNotFound) || ke.Key != "no.such.key" {
		t.Errorf("missing key: %v", err)
	}
	if _, err := f.GetString("llama.block_count"); !errors.Is(err, ErrKeyType) || !strings.Contains(err.Error(), "is uint32, want string") {
		t.Errorf("wrong type: %v", err)
	}
	if _, err := f.GetUint(KeyArchitecture); !errors.Is(err, ErrKeyType) {
		t.Errorf("string as uint: %v", err)
	}
	if _, err := f.GetStringArray("tokenizer.ggml.scores"); !errors.Is(err, ErrKeyType) {
		t.Errorf("float array as strings: %v", err)
	}
	if n, err := f.GetInt("llama.block_count"); n != 5 || err != nil {
		t.Errorf("GetInt: %d %v", n, err)
	}
	v, _ := f.Get("tokenizer.ggml.scores")
	if s, ok := v.Float32Array(); !ok || len(s) != 512 {
		t.Errorf("scores: %v", v)
	}
}

func TestParseErrors(t *testing.T) {
	real, err := os.ReadFile(sharedtest.Stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	kv := func(e *enc) *enc { return e.str("general.architecture").u32(uint32(TypeString)).str("llama") }
	tests := []struct {
		name string
		data []byte
		want error
		msg  string // substring of the message
	}{
		{"empty", nil, ErrBadMagic, "no magic"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), ErrBadMagic, `"GGML"`},
		{"version 0", new(enc).header(0, 0, 0).Bytes(), ErrVersion, "0 (supported: 1 to 3)"},
		{"version 4", new(enc).header(4, 0, 0).Bytes(), ErrVersion, "4"},
		{"truncated counts", []byte("GGUF\x03\x00\x00\x00\x01\x00"), ErrTruncated, "tensor count"},
		{"truncated header", real[:5000], ErrTruncated, ""},
		{"truncated data", real[:len(real)-1], ErrTensorBounds, "blk.4.ffn_norm.weight"},
		{"huge tensor count", new(enc).header(3, 1<<40, 0).Bytes(), ErrLimit, "tensor count"},
		{"tensor count beyond file", new(enc).header(3, 1000, 0).Bytes(), ErrTruncated, "tensor count 1000"},
		{"huge kv count", new(enc).header(3, 0, 1<<62).Bytes(), ErrLimit, "metadata count"},
		{"huge string", new(enc).header(3, 0, 1).u64(1 << 40).data(16).Bytes(), ErrLimit, "metadata key length"},
		{"string beyond file", new(enc).header(3, 0, 1).u64(100).data(16).Bytes(), ErrTruncated, "metadata key length 100"},
		{"unknown value type", new(enc).header(3, 0, 1).str("k").u32(13).Bytes(), ErrValueType, "13"},
		{"nested array", new(enc).header(3, 0, 1).str("k").u32(9).u32(9).u64(0).Bytes(), ErrValueType, "nested"},
		{"huge array", new(enc).header(3, 0, 1).str("k").u32(9).u32(4).u64(1 << 29).Bytes(), ErrTruncated, "array length"},
		{"bad bool", new(enc).header(3, 0, 1).str("k").u32(7).Bytes(), ErrTruncated, ""},
		{"duplicate key", kv(kv(new(enc).header(3, 0, 2))).Bytes(), ErrDuplicate, "general.architecture"},
		{"bad alignment", new(enc).header(3, 0, 1).str(KeyAlignment).u32(4).u32(48).Bytes(), ErrAlignment, "48"},
		{"unknown tensor type", new(enc).header(3, 1, 0).tensorInfo("w", []uint64{32}, 4, 0).data(64).Bytes(), ErrTensorType, `4 for tensor "w"`},
		{"tensor type 99", new(enc).header(3, 1, 0).tensorInfo("w", []uint64{32}, 99, 0).data(64).Bytes(), ErrTensorType, "99"},
		{"too many dims", new(enc).header(3, 1, 0).tensorInfo("w", []uint64{1, 1, 1, 1, 1}, 0, 0).Bytes(), ErrDims, "5 dimensions"},
		{"dims overflow", new(enc).header(3, 1, 0).tensorInfo("w", []uint64{1 << 40, 1 << 40}, 0, 0).data(64).Bytes(), ErrDims, "overflow"},
		{"dim negative", new(enc).header(3, 1, 0).tensorInfo("w", []uint64{1 << 63}, 0, 0).Bytes(), ErrDims, ""},
		{"row not multiple of block", new(enc).header(3, 1, 0).tensorInfo("w", []uint64{33}, uint32(Q4_0), 0).data(64).Bytes(), ErrDims, "block size 32"},
		{"offset past end", new(enc).header(3, 1, 0).tensorInfo("w", []uint64{8}, 0, 64).data(32).Bytes(), ErrTensorBounds, `"w"`},
		{"size past end", new(enc).header(3, 1, 0).tensorInfo("w", []uint64{9}, 0, 0).data(32).Bytes(), ErrTensorBounds, `"w"`},
		{"offset misaligned", new(enc).header(3, 1, 0).tensorInfo("w", []uint64{8}, 0, 4).data(64).Bytes(), ErrAlignment, "offset 4"},
		{"duplicate tensor", new(enc).header(3, 2, 0).tensorInfo("w", []uint64{8}, 0, 0).tensorInfo("w", []uint64{8}, 0, 32).data(64).Bytes(), ErrDuplicate, `"w"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(bytes.NewReader(tc.data), int64(len(tc.data)))
			var fe *FormatError
			if !errors.Is(err, tc.want) || !errors.As(err, &fe) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) || strings.Count(err.Error(), "\n") != 0 {
				t.Errorf("message %q lacks %q", err, tc.msg)
			}
		})
	}
}

func TestOpenNamesFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "notgguf.bin")
	os.WriteFile(p, []byte("hello world, not a model"), 0o644)
	_, err := Open(p)
	if !errors.Is(err, ErrBadMagic) || !strings.Contains(err.Error(), p) {
		t.Errorf("err = %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrBadMagic) {
		t.Errorf("directory: %v", err)
	}
}

func TestV1Layout(t *testing.T) {
	// v1: 32-bit counts, string lengths and dims.
	e := &enc{v1: true}
	e.header(1, 1, 1).str("general.name").u32(uint32(TypeString)).str("v1")
	e.str("w").u32(2).u32(4).u32(2).u32(uint32(F32)).u64(0)
	e.data(32)
	f, err := Parse(bytes.NewReader(e.Bytes()), int64(e.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := f.GetString("general.name"); s != "v1" || f.Tensors[0].Size != 32 || f.Tensors[0].Dims[1] != 2 {
		t.Fatalf("%+v", f)
	}
}

func TestTypeTraits(t *testing.T) {
	tests := []struct {
		t       Type
		name    string
		bs, ts  int
		row4096 int64
	}{
		{F32, "F32", 1, 4, 16384},
		{F16, "F16", 1, 2, 8192},
		{BF16, "BF16", 1, 2, 8192},
		{Q4_0, "Q4_0", 32, 18, 2304},
		{Q8_0, "Q8_0", 32, 34, 4352},
		{Q4_K, "Q4_K", 256, 144, 2304},
		{Q6_K, "Q6_K", 256, 210, 3360},
	}
	for _, tc := range tests {
		if tc.t.String() != tc.name || tc.t.BlockSize() != tc.bs || tc.t.TypeSize() != tc.ts || tc.t.RowSize(4096) != tc.row4096 {
			t.Errorf("%v: %d %d %d", tc.t, tc.t.BlockSize(), tc.t.TypeSize(), tc.t.RowSize(4096))
		}
		if p, err := ParseType(strings.ToLower(tc.name)); err != nil || p != tc.t {
			t.Errorf("ParseType(%s) = %v, %v", tc.name, p, err)
		}
	}
	if _, err := Q4_0.RowSizeChecked(33); !errors.Is(err, ErrDims) {
		t.Errorf("RowSizeChecked(33) = %v", err)
	}
	if _, err := Type(4).RowSizeChecked(32); !errors.Is(err, ErrTensorType) {
		t.Errorf("type 4: %v", err)
	}
	if Type(4).Valid() || Type(4).String() != "type(4)" || len(Types()) != 32 {
		t.Errorf("invalid types: %v %d", Type(4), len(Types()))
	}
}
