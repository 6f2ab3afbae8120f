package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// Writer streams a GGUF v3 file: declare every KV and tensor first (so all
// offsets are known), then write the tensors' data in declaration order, in
// chunks of any size, then Close. The header is written on the first Write
// (or WriteHeader). Alignment padding is inserted automatically. A Writer
// holds at most its buffer (1 MiB) of tensor data; it is not safe for
// concurrent use.
type Writer struct {
	bw     *bufio.Writer
	closer io.Closer // the file from Create, else nil
	name   string

	alignment int64
	kv        []KV
	kvIndex   map[string]bool
	tensors   []TensorInfo
	tIndex    map[string]bool

	headerDone bool
	closed     bool
	pos        int64 // bytes written so far
	dataOffset int64
	cur        int   // tensor being written
	curDone    int64 // bytes of tensor cur written
	err        error // sticky write error
}

const writerBufferLen = 1 << 20

// NewWriter returns a Writer that streams a GGUF file to w. Close does not
// close w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{
		bw:        bufio.NewWriterSize(w, writerBufferLen),
		alignment: DefaultAlignment,
		kvIndex:   map[string]bool{},
		tIndex:    map[string]bool{},
	}
}

// Create creates (truncates) the file at path and returns a Writer for it;
// Close closes the file.
func Create(path string) (*Writer, error) {
	fh, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := NewWriter(fh)
	w.closer, w.name = fh, path
	return w, nil
}

// errorf returns an error naming the output and wrapping sentinel.
func (w *Writer) errorf(sentinel error, format string, args ...any) error {
	name := w.name
	if name == "" {
		name = "<writer>"
	}
	return fmt.Errorf("gguf %s: %w: "+format, append([]any{name, sentinel}, args...)...)
}

// AddKV declares a metadata key/value, before the header is written. Setting
// general.alignment (an unsigned power of two) changes the data alignment.
func (w *Writer) AddKV(key string, v Value) error {
	if w.headerDone {
		return w.errorf(ErrWriterState, "AddKV(%q) after the header was written", key)
	}
	if w.kvIndex[key] {
		return w.errorf(ErrDuplicate, "metadata key %q", key)
	}
	if v.typ >= valueTypeCount || (v.typ == TypeArray && (v.elem >= valueTypeCount || v.elem == TypeArray)) {
		return w.errorf(ErrValueType, "key %q has an invalid value", key)
	}
	if key == KeyAlignment {
		a, ok := v.Uint()
		if !ok || v.typ != TypeUint32 || a == 0 || a&(a-1) != 0 {
			return w.errorf(ErrAlignment, "%s must be a uint32 power of two, got %v", key, v)
		}
		w.alignment = int64(a)
	}
	w.kvIndex[key] = true
	w.kv = append(w.kv, KV{Key: key, Value: v})
	return nil
}

// AddTensor declares a tensor (dims ne[0] first), before the header is written.
func (w *Writer) AddTensor(name string, dims []int64, typ Type) error {
	if w.headerDone {
		return w.errorf(ErrWriterState, "AddTensor(%q) after the header was written", name)
	}
	if w.tIndex[name] {
		return w.errorf(ErrDuplicate, "tensor %q", name)
	}
	if len(dims) == 0 || len(dims) > MaxDims {
		return w.errorf(ErrDims, "tensor %q has %d dimensions", name, len(dims))
	}
	t := TensorInfo{Name: name, Dims: append([]int64(nil), dims...), Type: typ}
	if !typ.Valid() {
		return w.errorf(ErrTensorType, "%d for tensor %q", uint32(typ), name)
	}
	for _, d := range dims {
		if d <= 0 {
			return w.errorf(ErrDims, "tensor %q dims %v", name, dims)
		}
	}
	sz, err := tensorSize(&t)
	if err != nil {
		return w.errorf(ErrDims, "tensor %q: %v", name, err)
	}
	t.Size = sz
	w.tIndex[name] = true
	w.tensors = append(w.tensors, t)
	return nil
}

// Tensors returns the declared tensors with their data offsets (final once
// WriteHeader has run).
func (w *Writer) Tensors() []TensorInfo { return w.tensors }

// DataOffset is the absolute offset of the data section, known after WriteHeader.
func (w *Writer) DataOffset() int64 { return w.dataOffset }

// Written is the number of bytes written so far (header and data).
func (w *Writer) Written() int64 { return w.pos }

// Current returns the index of the tensor the next Write goes to and how many
// of its bytes are still expected; index == len(Tensors()) when all are done.
func (w *Writer) Current() (index int, remaining int64) {
	if w.cur >= len(w.tensors) {
		return w.cur, 0
	}
	return w.cur, w.tensors[w.cur].Size - w.curDone
}

// WriteHeader fixes the tensor offsets and writes the header and the padding
// before the data. Write calls it if needed.
func (w *Writer) WriteHeader() error {
	if w.headerDone {
		return w.errorf(ErrWriterState, "header written twice")
	}
	w.headerDone = true
	var off int64
	for i := range w.tensors {
		w.tensors[i].Offset = off
		off = alignUp(off+w.tensors[i].Size, w.alignment)
	}
	w.raw([]byte(Magic))
	w.u32(3)
	w.u64(uint64(len(w.tensors)))
	w.u64(uint64(len(w.kv)))
	for _, kv := range w.kv {
		w.str(kv.Key)
		w.u32(uint32(kv.Value.typ))
		w.value(kv.Value)
	}
	for _, t := range w.tensors {
		w.str(t.Name)
		w.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			w.u64(uint64(d))
		}
		w.u32(uint32(t.Type))
		w.u64(uint64(t.Offset))
	}
	// Pad to the data section; a file without tensors ends with its header
	// (as llama.cpp's vocab-only files do).
	if len(w.tensors) > 0 {
		w.pad()
	}
	w.dataOffset = w.pos
	return w.err
}

// Write appends tensor data, in declaration order. A chunk may span tensors;
// padding between tensors is inserted automatically. Writing more bytes than
// the declared tensors hold is an error.
func (w *Writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, w.errorf(ErrWriterState, "Write after Close")
	}
	if !w.headerDone {
		if err := w.WriteHeader(); err != nil {
			return 0, err
		}
	}
	n := 0
	for len(p) > 0 && w.err == nil {
		if w.cur >= len(w.tensors) {
			return n, w.errorf(ErrWriterState, "%d bytes past the last tensor", len(p))
		}
		t := &w.tensors[w.cur]
		k := int(min(int64(len(p)), t.Size-w.curDone))
		w.raw(p[:k])
		n += k
		p = p[k:]
		w.curDone += int64(k)
		if w.curDone == t.Size {
			w.pad()
			w.cur++
			w.curDone = 0
			w.skipEmpty()
		}
	}
	return n, w.err
}

// skipEmpty advances over zero-byte tensors (padding only).
func (w *Writer) skipEmpty() {
	for w.cur < len(w.tensors) && w.tensors[w.cur].Size == 0 {
		w.pad()
		w.cur++
	}
}

// Close checks that every tensor's data was written, flushes, and closes the
// file opened by Create. It returns the first error seen.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	if !w.headerDone {
		w.WriteHeader()
	}
	w.skipEmpty()
	w.closed = true
	err := w.err
	if err == nil && w.cur < len(w.tensors) {
		t := w.tensors[w.cur]
		err = w.errorf(ErrWriterState, "closed with tensor %q incomplete (%d of %d bytes) and %d more tensors pending",
			t.Name, w.curDone, t.Size, len(w.tensors)-w.cur-1)
	}
	if ferr := w.bw.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if w.closer != nil {
		if cerr := w.closer.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	return err
}

// Low-level encoding; errors are sticky in w.err.

func (w *Writer) raw(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.bw.Write(b)
	w.pos += int64(n)
	w.err = err
}

func (w *Writer) u8(v uint8) { w.raw([]byte{v}) }
func (w *Writer) u16(v uint16) {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], v)
	w.raw(b[:])
}
func (w *Writer) u32(v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	w.raw(b[:])
}
func (w *Writer) u64(v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	w.raw(b[:])
}
func (w *Writer) str(s string) {
	w.u64(uint64(len(s)))
	if w.err == nil {
		n, err := w.bw.WriteString(s)
		w.pos += int64(n)
		w.err = err
	}
}

var zeros [256]byte

func (w *Writer) pad() {
	if n := alignUp(w.pos, w.alignment) - w.pos; n > 0 {
		for n > 0 {
			k := min(n, int64(len(zeros)))
			w.raw(zeros[:k])
			n -= k
		}
	}
}

func (w *Writer) scalar(t ValueType, u uint64) {
	switch scalarSize[t] {
	case 1:
		w.u8(uint8(u))
	case 2:
		w.u16(uint16(u))
	case 4:
		if t == TypeFloat32 {
			u = uint64(math.Float32bits(float32(math.Float64frombits(u))))
		}
		w.u32(uint32(u))
	case 8:
		w.u64(u)
	}
}

func (w *Writer) value(v Value) {
	switch v.typ {
	case TypeString:
		w.str(v.s)
		return
	case TypeArray:
		w.u32(uint32(v.elem))
		w.u64(uint64(v.Len()))
		w.array(v)
		return
	}
	w.scalar(v.typ, v.u)
}

func (w *Writer) array(v Value) {
	switch a := v.arr.(type) {
	case []string:
		for _, s := range a {
			w.str(s)
		}
	case []uint8:
		w.raw(a)
	case []int8:
		for _, x := range a {
			w.u8(uint8(x))
		}
	case []uint16:
		for _, x := range a {
			w.u16(x)
		}
	case []int16:
		for _, x := range a {
			w.u16(uint16(x))
		}
	case []uint32:
		for _, x := range a {
			w.u32(x)
		}
	case []int32:
		for _, x := range a {
			w.u32(uint32(x))
		}
	case []uint64:
		for _, x := range a {
			w.u64(x)
		}
	case []int64:
		for _, x := range a {
			w.u64(uint64(x))
		}
	case []float32:
		for _, x := range a {
			w.u32(math.Float32bits(x))
		}
	case []float64:
		for _, x := range a {
			w.u64(math.Float64bits(x))
		}
	case []bool:
		for _, x := range a {
			if x {
				w.u8(1)
			} else {
				w.u8(0)
			}
		}
	}
}
