package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// seedDir holds the fuzz seed corpus: small valid files and truncated heads
// of real models (see testdata/gguf/README.md).
const seedDir = "../../testdata/gguf"

func TestSeedCorpus(t *testing.T) {
	want := map[string]error{
		"tiny-valid.gguf":          nil,
		"stories260K-head16k.gguf": ErrTensorBounds, // header complete, data cut
		"q4_0-head16k.gguf":        ErrTensorBounds,
		"v1-head12k.gguf":          ErrTensorBounds,
		"vocab-spm-head8k.gguf":    ErrTruncated, // cut inside the token list
		"header-only.gguf":         ErrTruncated,
	}
	for name, w := range want {
		b, err := os.ReadFile(filepath.Join(seedDir, name))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Parse(bytes.NewReader(b), int64(len(b)))
		if (w == nil && err != nil) || !errors.Is(err, w) {
			t.Errorf("%s: err = %v, want %v", name, err, w)
		}
	}
}

// FuzzParse: Parse never panics, and whatever it accepts satisfies the
// File invariants and survives a write/parse round trip of its metadata.
//
//	go test ./internal/gguf -run '^$' -fuzz FuzzParse -fuzztime 60s -fuzzminimizetime 2s
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(seedDir, "*.gguf"))
	if len(seeds) == 0 {
		f.Fatalf("no seeds in %s", seedDir)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error is not a *FormatError: %v", err)
			}
			return
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			if ti.Size < 0 || file.AbsOffset(ti)+ti.Size > int64(len(b)) || ti.Offset%file.Alignment != 0 {
				t.Fatalf("tensor %q out of bounds: %+v", ti.Name, ti)
			}
			if got, ok := file.Tensor(ti.Name); !ok || got != ti {
				t.Fatalf("Tensor(%q) lookup broken", ti.Name)
			}
		}
		// Metadata round trip through the writer.
		var buf bytes.Buffer
		w := NewWriter(&buf)
		for _, kv := range file.KV {
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				return // e.g. a uint64 general.alignment the reader accepts
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		for i, kv := range file.KV {
			a, b := kv.Value.Interface(), again.KV[i].Value.Interface()
			if kv.Key != again.KV[i].Key || (!reflect.DeepEqual(a, b) && !hasNaN(kv.Value)) {
				t.Fatalf("KV %q changed: %#v -> %#v", kv.Key, a, b)
			}
		}
	})
}

func hasNaN(v Value) bool {
	if x, ok := v.Float(); ok {
		return x != x
	}
	switch a := v.Array().(type) {
	case []float32:
		for _, x := range a {
			if x != x {
				return true
			}
		}
	case []float64:
		for _, x := range a {
			if x != x {
				return true
			}
		}
	}
	return false
}
