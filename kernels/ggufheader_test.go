package kernels

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

func header(magic string, version uint32, nt, nkv uint64) []byte {
	b := []byte(magic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, nt)
	return binary.LittleEndian.AppendUint64(b, nkv)
}

func TestParseModelFileHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		size int64
		ok   bool
	}{
		{"v3", header("GGUF", 3, 48, 20), 1 << 20, true},
		{"v2", header("GGUF", 2, 1, 1), 1 << 10, true},
		{"no-size-check", header("GGUF", 3, 1<<40, 1<<40), -1, true},
		{"v1", header("GGUF", 1, 1, 1), 1 << 10, false},
		{"v4", header("GGUF", 4, 1, 1), 1 << 10, false},
		{"big-endian", header("GGUF", 3<<24, 1, 1), 1 << 10, false},
		{"magic", header("GGML", 3, 1, 1), 1 << 10, false},
		{"short", []byte("GGUF\x03\x00\x00\x00"), 8, false},
		{"tiny", []byte("GG"), 2, false},
		{"tensors-exceed-file", header("GGUF", 3, 1000, 0), 1000, false},
		{"kv-exceed-file", header("GGUF", 3, 0, 1<<62), 1 << 20, false},
		{"overflow", header("GGUF", 3, 1<<63, 1<<63), 1 << 62, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseModelFileHeader(tc.b, tc.size)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseModelFileHeader = %+v, %v; want ok %v", h, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrNotGGUF) {
				t.Fatalf("error %v does not wrap ErrNotGGUF", err)
			}
		})
	}
	h, err := ReadModelFileHeader(sharedtest.Stories260K(t))
	if err != nil || h.Version != 3 || h.NTensors != 48 {
		t.Fatalf("stories260K header = %+v, %v", h, err)
	}
}

// FuzzParseModelFileHeader: never panics; accepts only what it can vouch for.
// Seed corpus in testdata/fuzz/FuzzParseModelFileHeader.
func FuzzParseModelFileHeader(f *testing.F) {
	f.Add(header("GGUF", 3, 48, 20), int64(1<<20))
	f.Add(header("GGUF", 1, 0, 0), int64(24))
	f.Add([]byte("GGUF"), int64(4))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		h, err := ParseModelFileHeader(b, size)
		if err != nil {
			if !errors.Is(err, ErrNotGGUF) {
				t.Fatalf("error %v does not wrap ErrNotGGUF", err)
			}
			return
		}
		if len(b) < ggufHeaderSize || string(b[:4]) != "GGUF" || h.Version < 2 || h.Version > 3 {
			t.Fatalf("accepted %x as %+v", b, h)
		}
		if size >= 0 && (h.NTensors*ggufMinTensorInfo+h.NKV*ggufMinKV) > uint64(max(size-ggufHeaderSize, 0)) {
			t.Fatalf("accepted counts %+v beyond size %d", h, size)
		}
	})
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func asPathError(err error, pe **PathError) bool { return errors.As(err, pe) }
