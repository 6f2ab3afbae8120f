package gguf

import "fmt"

// Type is a ggml tensor type (enum ggml_type), as stored in a GGUF tensor info.
type Type uint32

// The ggml tensor types. Gaps (4, 5, 31–33, 36–38) are types removed from ggml.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39

	// TypeCount is GGML_TYPE_COUNT: every valid Type is below it.
	TypeCount Type = 40
)

// typeTraits mirrors the blck_size/type_size columns of ggml.c's type_traits
// (checked against the compiled ggml by internal/synth's
// TestTypeTraitsMatchGGML, since this package has no cgo).
type typeTraits struct {
	name      string
	blockSize int // elements per block
	typeSize  int // bytes per block
}

var traits = [TypeCount]typeTraits{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 18},
	Q4_1:    {"Q4_1", 32, 20},
	Q5_0:    {"Q5_0", 32, 22},
	Q5_1:    {"Q5_1", 32, 24},
	Q8_0:    {"Q8_0", 32, 34},
	Q8_1:    {"Q8_1", 32, 36},
	Q2_K:    {"Q2_K", 256, 84},
	Q3_K:    {"Q3_K", 256, 110},
	Q4_K:    {"Q4_K", 256, 144},
	Q5_K:    {"Q5_K", 256, 176},
	Q6_K:    {"Q6_K", 256, 210},
	Q8_K:    {"Q8_K", 256, 292},
	IQ2_XXS: {"IQ2_XXS", 256, 66},
	IQ2_XS:  {"IQ2_XS", 256, 74},
	IQ3_XXS: {"IQ3_XXS", 256, 98},
	IQ1_S:   {"IQ1_S", 256, 50},
	IQ4_NL:  {"IQ4_NL", 32, 18},
	IQ3_S:   {"IQ3_S", 256, 110},
	IQ2_S:   {"IQ2_S", 256, 82},
	IQ4_XS:  {"IQ4_XS", 256, 136},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", 256, 56},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", 256, 54},
	TQ2_0:   {"TQ2_0", 256, 66},
	MXFP4:   {"MXFP4", 32, 17},
}

// Types returns every valid type, in numeric order.
func Types() []Type {
	var ts []Type
	for t := Type(0); t < TypeCount; t++ {
		if t.Valid() {
			ts = append(ts, t)
		}
	}
	return ts
}

// Valid reports whether t is a type ggml (and this package) knows.
func (t Type) Valid() bool { return t < TypeCount && traits[t].blockSize > 0 }

// String returns ggml's name of the type ("Q4_0"), or "type(N)" if unknown.
func (t Type) String() string {
	if t.Valid() {
		return traits[t].name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements in one block (1 for F32, 32 for Q4_0,
// 256 for K-quants); 0 for an unknown type.
func (t Type) BlockSize() int {
	if t.Valid() {
		return traits[t].blockSize
	}
	return 0
}

// TypeSize is the number of bytes of one block; 0 for an unknown type.
func (t Type) TypeSize() int {
	if t.Valid() {
		return traits[t].typeSize
	}
	return 0
}

// RowSize is the number of bytes of a row of n elements, like ggml_row_size.
// It is exact only when n is a multiple of BlockSize and t is valid; use
// RowSizeChecked when that is not known.
func (t Type) RowSize(n int64) int64 {
	if !t.Valid() {
		return 0
	}
	return int64(traits[t].typeSize) * (n / int64(traits[t].blockSize))
}

// RowSizeChecked is RowSize with validation: the type must be known, n
// non-negative and a multiple of the block size, and the result must fit in int64.
func (t Type) RowSizeChecked(n int64) (int64, error) {
	if !t.Valid() {
		return 0, fmt.Errorf("%w: %d", ErrTensorType, uint32(t))
	}
	bs := int64(traits[t].blockSize)
	if n < 0 || n%bs != 0 {
		return 0, fmt.Errorf("%w: row of %d elements is not a multiple of %s's block size %d", ErrDims, n, t, bs)
	}
	blocks := n / bs
	ts := int64(traits[t].typeSize)
	if blocks > maxInt64/ts {
		return 0, fmt.Errorf("%w: row of %d elements of %s overflows", ErrDims, n, t)
	}
	return blocks * ts, nil
}

// ParseType maps a type name ("q4_0", "Q4_K", "f16") to its Type.
func ParseType(name string) (Type, error) {
	for t := Type(0); t < TypeCount; t++ {
		if t.Valid() && equalFold(traits[t].name, name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown tensor type %q", name)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

const maxInt64 = int64(^uint64(0) >> 1)
