package kernels

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// ModelFileHeader is the fixed-size start of a GGUF file: magic, version and
// the two counts. It is checked before a path is handed to llama.cpp, so a
// wrong file fails with a precise Go error instead of a C-side log line.
type ModelFileHeader struct {
	Version  uint32
	NTensors uint64
	NKV      uint64
}

// Minimum encoded sizes, used to bound the counts by the file size: a tensor
// info is at least a name length (8), n_dims (4), one dim (8), type (4) and
// offset (8); a key-value pair at least a key length (8) and a type (4).
const (
	ggufHeaderSize     = 4 + 4 + 8 + 8
	ggufMinTensorInfo  = 8 + 4 + 8 + 4 + 8
	ggufMinKV          = 8 + 4
	ggufMinVersion     = 2 // llama.cpp dropped GGUFv1
	ggufCurrentVersion = 3
)

// ParseModelFileHeader parses the first 24 bytes of a GGUF file. size is the
// file size in bytes (the counts must fit in it); a negative size skips that
// check. It accepts the versions this llama.cpp reads (2 and 3).
func ParseModelFileHeader(b []byte, size int64) (ModelFileHeader, error) {
	var h ModelFileHeader
	if len(b) < 8 || string(b[:4]) != "GGUF" {
		if len(b) >= 4 {
			return h, fmt.Errorf("%w: magic %q, want \"GGUF\"", ErrNotGGUF, b[:4])
		}
		return h, fmt.Errorf("%w: %d bytes, too short for a header", ErrNotGGUF, len(b))
	}
	h.Version = binary.LittleEndian.Uint32(b[4:8])
	switch {
	case h.Version == 1:
		return h, fmt.Errorf("%w: GGUF version 1 is no longer supported by llama.cpp (want %d..%d)", ErrNotGGUF, ggufMinVersion, ggufCurrentVersion)
	case h.Version < ggufMinVersion || h.Version > ggufCurrentVersion:
		return h, fmt.Errorf("%w: GGUF version %d (want %d..%d; a big-endian file?)", ErrNotGGUF, h.Version, ggufMinVersion, ggufCurrentVersion)
	}
	if len(b) < ggufHeaderSize {
		return h, fmt.Errorf("%w: %d bytes, too short for a GGUF v%d header", ErrNotGGUF, len(b), h.Version)
	}
	h.NTensors = binary.LittleEndian.Uint64(b[8:16])
	h.NKV = binary.LittleEndian.Uint64(b[16:24])
	if size >= 0 {
		rest := uint64(max(size-ggufHeaderSize, 0))
		if h.NTensors > rest/ggufMinTensorInfo {
			return h, fmt.Errorf("%w: %d tensors cannot fit in %d bytes", ErrNotGGUF, h.NTensors, size)
		}
		if h.NKV > rest/ggufMinKV || h.NTensors*ggufMinTensorInfo+h.NKV*ggufMinKV > rest {
			return h, fmt.Errorf("%w: %d tensors and %d metadata keys cannot fit in %d bytes", ErrNotGGUF, h.NTensors, h.NKV, size)
		}
	}
	return h, nil
}

// ReadModelFileHeader opens path and checks its GGUF header. Errors wrap
// ErrNotGGUF, or are the *os.PathError of a missing or unreadable file.
func ReadModelFileHeader(path string) (ModelFileHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return ModelFileHeader{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ModelFileHeader{}, err
	}
	if st.IsDir() {
		return ModelFileHeader{}, fmt.Errorf("%w: is a directory", ErrNotGGUF)
	}
	var b [ggufHeaderSize]byte
	n, err := io.ReadFull(f, b[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return ModelFileHeader{}, err
	}
	return ParseModelFileHeader(b[:n], st.Size())
}
