package gguf

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

func TestWriterRoundTrip(t *testing.T) {
	kvs := []KV{
		{"general.architecture", String("llama")},
		{"u8", Uint8(200)}, {"i8", Int8(-5)}, {"u16", Uint16(60000)}, {"i16", Int16(-3000)},
		{"u32", Uint32(1 << 31)}, {"i32", Int32(-1 << 30)}, {"u64", Uint64(1 << 60)}, {"i64", Int64(-1 << 60)},
		{"f32", Float32(1.5e-5)}, {"f64", Float64(math.Pi)}, {"t", Bool(true)}, {"f", Bool(false)},
		{"empty", String("")}, {"utf8", String("héllo ▁wörld")},
		{"strs", Strings([]string{"a", "", "<s>", "▁the"})},
		{"u8s", Uint8s([]uint8{1, 2, 3})}, {"i8s", Int8s([]int8{-1, 2})}, {"u16s", Uint16s([]uint16{7})},
		{"i16s", Int16s([]int16{-7})}, {"u32s", Uint32s([]uint32{1, 2})}, {"i32s", Int32s([]int32{-1, 6})},
		{"u64s", Uint64s([]uint64{1 << 50})}, {"i64s", Int64s([]int64{-1 << 50})},
		{"f32s", Float32s([]float32{0.25, -1})}, {"f64s", Float64s([]float64{1e300})},
		{"bools", Bools([]bool{true, false, true})}, {"nothing", Int32s([]int32{})},
	}
	tensors := []struct {
		name string
		dims []int64
		typ  Type
	}{
		{"a", []int64{64, 3}, F32},
		{"b", []int64{5}, F16},      // 10 bytes: padding follows
		{"c", []int64{64, 2}, Q4_0}, // 72 bytes
		{"d", []int64{256, 2, 1}, Q6_K},
		{"e", []int64{7, 1, 1, 1}, I8},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range tensors {
		if err := w.AddTensor(tn.name, tn.dims, tn.typ); err != nil {
			t.Fatal(err)
		}
	}
	// Data: a deterministic byte stream written in random-sized chunks that
	// span tensor boundaries.
	var total int64
	for _, ti := range w.Tensors() {
		total += ti.Size
	}
	data := make([]byte, total)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for p := data; len(p) > 0; {
		k := min(len(p), 1+rng.IntN(100))
		if n, err := w.Write(p[:k]); err != nil || n != k {
			t.Fatalf("Write: %d, %v", n, err)
		}
		p = p[k:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	f, err := Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || len(f.KV) != len(kvs) || len(f.Tensors) != len(tensors) {
		t.Fatalf("v%d, %d KVs, %d tensors", f.Version, len(f.KV), len(f.Tensors))
	}
	for i, kv := range kvs {
		got := f.KV[i]
		if got.Key != kv.Key || got.Value.Type() != kv.Value.Type() || got.Value.ElemType() != kv.Value.ElemType() ||
			!reflect.DeepEqual(got.Value.Interface(), kv.Value.Interface()) {
			t.Errorf("KV %d: got %s=%#v, want %s=%#v", i, got.Key, got.Value.Interface(), kv.Key, kv.Value.Interface())
		}
	}
	var off int64
	for i, tn := range tensors {
		ti := f.Tensors[i]
		if ti.Name != tn.name || !reflect.DeepEqual(ti.Dims, tn.dims) || ti.Type != tn.typ || ti.Offset != w.Tensors()[i].Offset {
			t.Errorf("tensor %d: %+v", i, ti)
		}
		got := buf.Bytes()[f.AbsOffset(&ti) : f.AbsOffset(&ti)+ti.Size]
		if !bytes.Equal(got, data[off:off+ti.Size]) {
			t.Errorf("tensor %s data differs", ti.Name)
		}
		off += ti.Size
	}
	if int64(buf.Len())%32 != 0 || f.DataOffset != w.DataOffset() {
		t.Errorf("file size %d, data offset %d vs %d", buf.Len(), f.DataOffset, w.DataOffset())
	}
}

// TestWriterReproducesRealFile copies stories260K through Parse and the
// Writer (data streamed in 4 KiB chunks): the result is byte-identical, so our
// layout (order, padding, alignment) is exactly the reference writer's.
func TestWriterReproducesRealFile(t *testing.T) {
	for _, rel := range []string{"models/stories260K.gguf", "models/derived/stories260K-ff192-Q4_0.gguf"} {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			orig, err := os.ReadFile(sharedtest.Path(t, rel))
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(bytes.NewReader(orig), int64(len(orig)))
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "copy.gguf")
			w, err := Create(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range f.KV {
				if err := w.AddKV(kv.Key, kv.Value); err != nil {
					t.Fatal(err)
				}
			}
			for _, ti := range f.Tensors {
				if err := w.AddTensor(ti.Name, ti.Dims, ti.Type); err != nil {
					t.Fatal(err)
				}
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				r := io.NewSectionReader(bytes.NewReader(orig), f.AbsOffset(ti), ti.Size)
				if _, err := io.CopyBuffer(w, r, make([]byte, 4096)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(out)
			if !bytes.Equal(got, orig) {
				t.Fatalf("copy differs: %d vs %d bytes", len(got), len(orig))
			}
		})
	}
}

func TestWriterErrors(t *testing.T) {
	t.Run("incomplete", func(t *testing.T) {
		w := NewWriter(io.Discard)
		w.AddTensor("x", []int64{4}, F32)
		w.Write(make([]byte, 8))
		if err := w.Close(); !errors.Is(err, ErrWriterState) {
			t.Errorf("Close = %v", err)
		}
	})
	t.Run("overflow", func(t *testing.T) {
		w := NewWriter(io.Discard)
		w.AddTensor("x", []int64{4}, F32)
		if n, err := w.Write(make([]byte, 20)); n != 16 || !errors.Is(err, ErrWriterState) {
			t.Errorf("Write = %d, %v", n, err)
		}
	})
	t.Run("declare after header", func(t *testing.T) {
		w := NewWriter(io.Discard)
		w.WriteHeader()
		if err := w.AddKV("k", Uint8(1)); !errors.Is(err, ErrWriterState) {
			t.Errorf("AddKV = %v", err)
		}
		if err := w.AddTensor("x", []int64{4}, F32); !errors.Is(err, ErrWriterState) {
			t.Errorf("AddTensor = %v", err)
		}
	})
	tests := []struct {
		name string
		add  func(w *Writer) error
		want error
	}{
		{"alignment not power of two", func(w *Writer) error { return w.AddKV(KeyAlignment, Uint32(24)) }, ErrAlignment},
		{"alignment wrong type", func(w *Writer) error { return w.AddKV(KeyAlignment, Uint64(64)) }, ErrAlignment},
		{"duplicate key", func(w *Writer) error { w.AddKV("k", Uint8(1)); return w.AddKV("k", Uint8(1)) }, ErrDuplicate},
		{"invalid value", func(w *Writer) error { return w.AddKV("k", Value{typ: 99}) }, ErrValueType},
		{"duplicate tensor", func(w *Writer) error { w.AddTensor("x", []int64{4}, F32); return w.AddTensor("x", []int64{4}, F32) }, ErrDuplicate},
		{"bad block", func(w *Writer) error { return w.AddTensor("x", []int64{33}, Q8_0) }, ErrDims},
		{"zero dim", func(w *Writer) error { return w.AddTensor("x", []int64{32, 0}, F32) }, ErrDims},
		{"unknown type", func(w *Writer) error { return w.AddTensor("x", []int64{32}, Type(5)) }, ErrTensorType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.add(NewWriter(io.Discard))
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestWriterAlignment(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.AddKV(KeyAlignment, Uint32(4096))
	w.AddTensor("a", []int64{10}, F32)
	w.AddTensor("b", []int64{10}, F32)
	w.Write(make([]byte, 80))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Tensors {
		if !f.PageAlignedTo(&f.Tensors[i], 4096) {
			t.Errorf("tensor %d at %d not page aligned", i, f.AbsOffset(&f.Tensors[i]))
		}
	}
	if f.Alignment != 4096 || f.Tensors[1].Offset != 4096 {
		t.Errorf("alignment %d, offset %d", f.Alignment, f.Tensors[1].Offset)
	}
}
