// Package gguf reads and writes GGUF files, the model format of llama.cpp and
// ggml, in pure Go (no cgo).
//
// Open (or Parse, for any io.ReaderAt) reads and validates the header of a
// GGUF v1, v2 or v3 file: metadata key/values in file order and tensor infos
// with their offsets, but not the tensor data, which callers mmap or read at
// File.AbsOffset. Every problem becomes a *FormatError naming the file and the
// byte offset and wrapping one sentinel (ErrBadMagic, ErrTruncated, ErrLimit,
// ErrTensorType, ...). Counts and lengths are checked against the bytes left
// in the file before anything is allocated, so a corrupt header cannot make
// the parser allocate much more than the file's size.
//
//	f, err := gguf.Open("model.gguf")
//	n, err := f.GetUint("llama.block_count")
//	t, ok := f.Tensor("token_embd.weight") // t.Dims[0] is the row length (ne[0])
//	off := f.AbsOffset(t)
//
// Writer streams a GGUF v3 file: declare KVs and tensors, then write tensor
// data in declaration order in chunks of any size; neither a whole tensor nor
// the model need be in memory.
//
// A *File is immutable after parsing and safe for concurrent use; values
// returned by accessors (arrays in particular) are shared and must not be
// modified. A *Writer is for one goroutine.
package gguf
