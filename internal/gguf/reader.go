package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that overrides DefaultAlignment.
const KeyAlignment = "general.alignment"

// MaxDims is GGML_MAX_DIMS: a tensor has at most this many dimensions.
const MaxDims = 4

// Hard limits on top of "cannot exceed the bytes left in the file". Together
// they bound what a corrupt or hostile header can make the parser allocate to
// a small multiple of the file size.
const (
	MaxKVs          = 1 << 20
	MaxTensors      = 1 << 20
	MaxStringLen    = 1 << 30
	MaxArrayLen     = 1 << 30
	MinVersion      = 1
	MaxVersion      = 3
	maxPrealloc     = 1 << 12 // never preallocate more elements than this up front
	readerBufferLen = 64 << 10
)

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	Name   string
	Dims   []int64 // ne[0] first, as ggml: Dims[0] is the row length
	Type   Type
	Offset int64 // relative to the data section (File.DataOffset)
	Size   int64 // bytes
}

// Elements is the number of elements (product of Dims).
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Rows is the number of rows (elements / Dims[0]); 0 for a 0-d tensor.
func (t *TensorInfo) Rows() int64 {
	if len(t.Dims) == 0 || t.Dims[0] == 0 {
		return 0
	}
	return t.Elements() / t.Dims[0]
}

// File is a parsed GGUF header: metadata and tensor infos, no tensor data.
// It is immutable after Parse and safe for concurrent reads.
type File struct {
	Name       string // path given to Open, "" for Parse
	Version    uint32
	Alignment  int64
	DataOffset int64 // absolute file offset of the tensor data section
	FileSize   int64
	KV         []KV // in file order
	Tensors    []TensorInfo

	kvIndex     map[string]int
	tensorIndex map[string]int
}

// Open reads and validates the header of the GGUF file at path (not the
// tensor data). Errors are *FormatError naming the file, or an *os.PathError.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &FormatError{File: path, Offset: -1, Err: fmt.Errorf("%w: not a regular file", ErrBadMagic)}
	}
	return parse(path, fh, st.Size())
}

// Parse reads and validates a GGUF header from r, whose total size is size.
func Parse(r io.ReaderAt, size int64) (*File, error) { return parse("", r, size) }

// decoder reads little-endian GGUF fields through a buffer, tracking the offset.
type decoder struct {
	br   *bufio.Reader
	off  int64
	size int64
	v1   bool
}

type parseErr struct {
	off int64
	err error
}

func (d *decoder) fail(off int64, format string, sentinel error, args ...any) {
	panic(parseErr{off, fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)})
}

func (d *decoder) remaining() int64 { return d.size - d.off }

func (d *decoder) bytes(n int, what string) []byte {
	if int64(n) > d.remaining() {
		d.fail(d.off, "reading %s (%d bytes, %d left)", ErrTruncated, what, n, d.remaining())
	}
	b, err := d.br.Peek(n)
	if err != nil {
		d.fail(d.off, "reading %s: %v", ErrTruncated, what, err)
	}
	d.br.Discard(n)
	d.off += int64(n)
	return b
}

func (d *decoder) u8(what string) uint8   { return d.bytes(1, what)[0] }
func (d *decoder) u16(what string) uint16 { return binary.LittleEndian.Uint16(d.bytes(2, what)) }
func (d *decoder) u32(what string) uint32 { return binary.LittleEndian.Uint32(d.bytes(4, what)) }
func (d *decoder) u64(what string) uint64 { return binary.LittleEndian.Uint64(d.bytes(8, what)) }

// count reads a v1 uint32 or v2+ uint64 count/length and checks it against
// limit and against the bytes left (each item takes at least minBytes).
func (d *decoder) count(what string, limit int64, minBytes int64) int64 {
	at := d.off
	var n uint64
	if d.v1 {
		n = uint64(d.u32(what))
	} else {
		n = d.u64(what)
	}
	if n > uint64(limit) {
		d.fail(at, "%s %d exceeds limit %d", ErrLimit, what, n, limit)
	}
	if minBytes > 0 && int64(n) > d.remaining()/minBytes {
		d.fail(at, "%s %d needs at least %d bytes, %d left", ErrTruncated, what, n, int64(n)*minBytes, d.remaining())
	}
	return int64(n)
}

func (d *decoder) lenSize() int64 {
	if d.v1 {
		return 4
	}
	return 8
}

func (d *decoder) str(what string) string {
	n := d.count(what+" length", MaxStringLen, 1)
	if n == 0 {
		return ""
	}
	if n <= readerBufferLen {
		return string(d.bytes(int(n), what))
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.br, b); err != nil {
		d.fail(d.off, "reading %s: %v", ErrTruncated, what, err)
	}
	d.off += n
	return string(b)
}

func (d *decoder) valueType(what string) ValueType {
	at := d.off
	t := ValueType(d.u32(what))
	if t >= valueTypeCount {
		d.fail(at, "%d (%s)", ErrValueType, uint32(t), what)
	}
	return t
}

func (d *decoder) scalar(t ValueType, what string) Value {
	switch t {
	case TypeUint8:
		return Uint8(d.u8(what))
	case TypeInt8:
		return Int8(int8(d.u8(what)))
	case TypeUint16:
		return Uint16(d.u16(what))
	case TypeInt16:
		return Int16(int16(d.u16(what)))
	case TypeUint32:
		return Uint32(d.u32(what))
	case TypeInt32:
		return Int32(int32(d.u32(what)))
	case TypeUint64:
		return Uint64(d.u64(what))
	case TypeInt64:
		return Int64(int64(d.u64(what)))
	case TypeFloat32:
		return Float32(math.Float32frombits(d.u32(what)))
	case TypeFloat64:
		return Float64(math.Float64frombits(d.u64(what)))
	case TypeBool:
		at := d.off
		b := d.u8(what)
		if b > 1 {
			d.fail(at, "bool value %d in %s", ErrValueType, b, what)
		}
		return Bool(b == 1)
	case TypeString:
		return String(d.str(what))
	}
	d.fail(d.off, "%s in %s", ErrValueType, t, what)
	return Value{}
}

func readSlice[T any](d *decoder, n int64, read func() T) []T {
	s := make([]T, 0, min(n, maxPrealloc))
	for i := int64(0); i < n; i++ {
		s = append(s, read())
	}
	return s
}

func (d *decoder) array(what string) Value {
	at := d.off
	et := d.valueType(what + " element type")
	if et == TypeArray {
		d.fail(at, "nested array in %s", ErrValueType, what)
	}
	minBytes := int64(scalarSize[et])
	if et == TypeString {
		minBytes = d.lenSize()
	}
	n := d.count(what+" array length", MaxArrayLen, minBytes)
	switch et {
	case TypeUint8:
		return Uint8s(readSlice(d, n, func() uint8 { return d.u8(what) }))
	case TypeInt8:
		return Int8s(readSlice(d, n, func() int8 { return int8(d.u8(what)) }))
	case TypeUint16:
		return Uint16s(readSlice(d, n, func() uint16 { return d.u16(what) }))
	case TypeInt16:
		return Int16s(readSlice(d, n, func() int16 { return int16(d.u16(what)) }))
	case TypeUint32:
		return Uint32s(readSlice(d, n, func() uint32 { return d.u32(what) }))
	case TypeInt32:
		return Int32s(readSlice(d, n, func() int32 { return int32(d.u32(what)) }))
	case TypeUint64:
		return Uint64s(readSlice(d, n, func() uint64 { return d.u64(what) }))
	case TypeInt64:
		return Int64s(readSlice(d, n, func() int64 { return int64(d.u64(what)) }))
	case TypeFloat32:
		return Float32s(readSlice(d, n, func() float32 { return math.Float32frombits(d.u32(what)) }))
	case TypeFloat64:
		return Float64s(readSlice(d, n, func() float64 { return math.Float64frombits(d.u64(what)) }))
	case TypeBool:
		return Bools(readSlice(d, n, func() bool { b, _ := d.scalar(TypeBool, what).Bool(); return b }))
	default: // TypeString
		return Strings(readSlice(d, n, func() string { return d.str(what) }))
	}
}

func parse(name string, r io.ReaderAt, size int64) (f *File, err error) {
	d := &decoder{br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), readerBufferLen), size: size}
	defer func() {
		if p := recover(); p != nil {
			pe, ok := p.(parseErr)
			if !ok {
				panic(p)
			}
			f, err = nil, &FormatError{File: name, Offset: pe.off, Err: pe.err}
		}
	}()
	f = &File{Name: name, FileSize: size, Alignment: DefaultAlignment}

	// Header: magic, version, tensor and KV counts.
	if size < 4 {
		d.fail(0, "file of %d bytes has no magic", ErrBadMagic, size)
	}
	if m := d.bytes(4, "magic"); string(m) != Magic {
		d.fail(0, "got %q", ErrBadMagic, string(m))
	}
	f.Version = d.u32("version")
	if f.Version < MinVersion || f.Version > MaxVersion {
		d.fail(4, "%d (supported: %d to %d)", ErrVersion, f.Version, MinVersion, MaxVersion)
	}
	d.v1 = f.Version == 1
	ls := d.lenSize()
	// Smallest encodings: a tensor info is name length + n_dims + type + offset;
	// a KV is key length + value type + one byte.
	nTensors := d.count("tensor count", MaxTensors, ls+4+4+8)
	nKV := d.count("metadata count", MaxKVs, ls+4+1)

	// Metadata.
	f.KV = make([]KV, 0, min(nKV, maxPrealloc))
	f.kvIndex = make(map[string]int, min(nKV, maxPrealloc))
	for i := int64(0); i < nKV; i++ {
		at := d.off
		key := d.str("metadata key")
		if _, dup := f.kvIndex[key]; dup {
			d.fail(at, "metadata key %q", ErrDuplicate, key)
		}
		t := d.valueType("value type of " + key)
		var v Value
		if t == TypeArray {
			v = d.array(key)
		} else {
			v = d.scalar(t, key)
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	if v, ok := f.Get(KeyAlignment); ok {
		a, ok := v.Uint()
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<30 {
			d.fail(-1, "%s = %v: must be a power of two", ErrAlignment, KeyAlignment, v)
		}
		f.Alignment = int64(a)
	}

	// Tensor infos.
	f.Tensors = make([]TensorInfo, 0, min(nTensors, maxPrealloc))
	f.tensorIndex = make(map[string]int, min(nTensors, maxPrealloc))
	for i := int64(0); i < nTensors; i++ {
		at := d.off
		var t TensorInfo
		t.Name = d.str("tensor name")
		if _, dup := f.tensorIndex[t.Name]; dup {
			d.fail(at, "tensor %q", ErrDuplicate, t.Name)
		}
		nd := d.u32("tensor n_dims")
		if nd > MaxDims {
			d.fail(at, "tensor %q has %d dimensions (max %d)", ErrDims, t.Name, nd, MaxDims)
		}
		t.Dims = make([]int64, nd)
		for j := range t.Dims {
			var v uint64
			if d.v1 {
				v = uint64(d.u32("tensor dim"))
			} else {
				v = d.u64("tensor dim")
			}
			if v > uint64(maxInt64) {
				d.fail(at, "tensor %q dim %d = %d", ErrDims, t.Name, j, v)
			}
			t.Dims[j] = int64(v)
		}
		tt := d.u32("tensor type")
		t.Type = Type(tt)
		if !t.Type.Valid() {
			d.fail(at, "%d for tensor %q", ErrTensorType, tt, t.Name)
		}
		off := d.u64("tensor offset")
		if off > uint64(maxInt64) {
			d.fail(at, "tensor %q offset %d", ErrTensorBounds, t.Name, off)
		}
		t.Offset = int64(off)
		sz, err := tensorSize(&t)
		if err != nil {
			d.fail(at, "tensor %q: %v", ErrDims, t.Name, err)
		}
		t.Size = sz
		if t.Offset%f.Alignment != 0 {
			d.fail(at, "tensor %q offset %d is not a multiple of %d", ErrAlignment, t.Name, t.Offset, f.Alignment)
		}
		f.tensorIndex[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}

	// Data section: aligned after the header; every tensor must fit in the file.
	f.DataOffset = alignUp(d.off, f.Alignment)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset > size || t.Size > size-t.Offset || f.DataOffset > size-t.Offset-t.Size {
			d.fail(-1, "tensor %q: [%d, %d+%d) + data offset %d exceeds file size %d",
				ErrTensorBounds, t.Name, t.Offset, t.Offset, t.Size, f.DataOffset, size)
		}
	}
	return f, nil
}

// tensorSize is the byte size of t, checking block divisibility and overflow.
func tensorSize(t *TensorInfo) (int64, error) {
	if len(t.Dims) == 0 {
		return int64(t.Type.TypeSize()), nil // a scalar
	}
	n := int64(1)
	for j, v := range t.Dims {
		if v != 0 && n > maxInt64/v {
			return 0, fmt.Errorf("element count overflows at dim %d", j)
		}
		n *= v
	}
	bs := int64(t.Type.BlockSize())
	if t.Dims[0]%bs != 0 {
		return 0, fmt.Errorf("row of %d elements is not a multiple of %s's block size %d", t.Dims[0], t.Type, bs)
	}
	row := t.Type.RowSize(t.Dims[0])
	if t.Dims[0] == 0 {
		return 0, nil
	}
	rows := n / t.Dims[0]
	if row != 0 && rows > maxInt64/row {
		return 0, fmt.Errorf("byte size overflows")
	}
	return row * rows, nil
}

func alignUp(x, a int64) int64 { return (x + a - 1) / a * a }
