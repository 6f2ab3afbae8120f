package gguf

import "os"

// Well-known metadata keys.
const (
	KeyArchitecture = "general.architecture"
	KeyName         = "general.name"
	KeyFileType     = "general.file_type"
)

// Get returns the value of a metadata key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

func (f *File) lookup(key, want string) (Value, error) {
	v, ok := f.Get(key)
	if !ok {
		return Value{}, &KeyError{Key: key, Want: want, Err: ErrKeyNotFound}
	}
	return v, nil
}

func typeErr(key, want string, v Value) error {
	return &KeyError{Key: key, Want: want, Got: v.Type(), Err: ErrKeyType}
}

// GetString returns a string value.
func (f *File) GetString(key string) (string, error) {
	v, err := f.lookup(key, "string")
	if err != nil {
		return "", err
	}
	s, ok := v.Str()
	if !ok {
		return "", typeErr(key, "string", v)
	}
	return s, nil
}

// GetUint returns a non-negative integer value of any width.
func (f *File) GetUint(key string) (uint64, error) {
	v, err := f.lookup(key, "unsigned integer")
	if err != nil {
		return 0, err
	}
	u, ok := v.Uint()
	if !ok {
		return 0, typeErr(key, "unsigned integer", v)
	}
	return u, nil
}

// GetInt returns an integer value of any width that fits in int64.
func (f *File) GetInt(key string) (int64, error) {
	v, err := f.lookup(key, "integer")
	if err != nil {
		return 0, err
	}
	i, ok := v.Int()
	if !ok {
		return 0, typeErr(key, "integer", v)
	}
	return i, nil
}

// GetFloat returns a float32 or float64 value.
func (f *File) GetFloat(key string) (float64, error) {
	v, err := f.lookup(key, "float")
	if err != nil {
		return 0, err
	}
	x, ok := v.Float()
	if !ok {
		return 0, typeErr(key, "float", v)
	}
	return x, nil
}

// GetBool returns a bool value.
func (f *File) GetBool(key string) (bool, error) {
	v, err := f.lookup(key, "bool")
	if err != nil {
		return false, err
	}
	b, ok := v.Bool()
	if !ok {
		return false, typeErr(key, "bool", v)
	}
	return b, nil
}

// GetStringArray returns an array of strings (shared, do not modify).
func (f *File) GetStringArray(key string) ([]string, error) {
	v, err := f.lookup(key, "array of string")
	if err != nil {
		return nil, err
	}
	s, ok := v.Strs()
	if !ok {
		return nil, typeErr(key, "array of string", v)
	}
	return s, nil
}

// GetArray returns an array value of any element type.
func (f *File) GetArray(key string) (Value, error) {
	v, err := f.lookup(key, "array")
	if err != nil {
		return Value{}, err
	}
	if !v.IsArray() {
		return Value{}, typeErr(key, "array", v)
	}
	return v, nil
}

// GetArrayLen returns the length of an array value.
func (f *File) GetArrayLen(key string) (int, error) {
	v, err := f.GetArray(key)
	if err != nil {
		return 0, err
	}
	return v.Len(), nil
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Arch returns general.architecture, "" if absent.
func (f *File) Arch() string {
	s, _ := f.GetString(KeyArchitecture)
	return s
}

// AbsOffset is the absolute file offset of t's data.
func (f *File) AbsOffset(t *TensorInfo) int64 { return f.DataOffset + t.Offset }

// PageAligned reports whether t's data starts on a page boundary of this
// machine (os.Getpagesize), so it can be mapped without copying at page
// granularity. Not an error when false: ggml only needs Alignment.
func (f *File) PageAligned(t *TensorInfo) bool {
	return f.PageAlignedTo(t, int64(os.Getpagesize()))
}

// PageAlignedTo is PageAligned for a given page size (4096, 16384 on some arm64).
func (f *File) PageAlignedTo(t *TensorInfo, pageSize int64) bool {
	return pageSize > 0 && f.AbsOffset(t)%pageSize == 0
}

// DataSize is the number of bytes from DataOffset to the end of the file.
func (f *File) DataSize() int64 { return max(0, f.FileSize-f.DataOffset) }

// ParamCount is the total number of tensor elements.
func (f *File) ParamCount() int64 {
	var n int64
	for i := range f.Tensors {
		n += f.Tensors[i].Elements()
	}
	return n
}
