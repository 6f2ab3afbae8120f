package gguf

import (
	"fmt"
	"math"
)

// ValueType is the type tag of a GGUF metadata value (enum gguf_type).
type ValueType uint32

// The GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12

	valueTypeCount ValueType = 13
)

var valueTypeNames = [valueTypeCount]string{
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64",
}

// scalarSize is the encoded size of a scalar type (0 for string and array).
var scalarSize = [valueTypeCount]int{1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}

func (t ValueType) String() string {
	if t < valueTypeCount {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value_type(%d)", uint32(t))
}

// KV is one metadata key/value pair.
type KV struct {
	Key   string
	Value Value
}

// Value is a GGUF metadata value: a scalar, a string, or an array of scalars
// or strings (nested arrays are rejected, as ggml does). The zero Value is
// invalid. Build values with the constructors (Uint32, String, Strings, ...);
// read them with the accessors, which convert between widths where no
// information is lost.
//
// Scalars keep their bits in u (ints sign-extended, floats as float64 bits),
// strings in s; arrays hold a typed Go slice in arr ([]uint8 ... []float64,
// []bool, []string).
type Value struct {
	typ  ValueType
	elem ValueType // element type of an array
	u    uint64
	s    string
	arr  any
}

// Constructors.

func Uint8(v uint8) Value     { return Value{typ: TypeUint8, u: uint64(v)} }
func Int8(v int8) Value       { return Value{typ: TypeInt8, u: uint64(int64(v))} }
func Uint16(v uint16) Value   { return Value{typ: TypeUint16, u: uint64(v)} }
func Int16(v int16) Value     { return Value{typ: TypeInt16, u: uint64(int64(v))} }
func Uint32(v uint32) Value   { return Value{typ: TypeUint32, u: uint64(v)} }
func Int32(v int32) Value     { return Value{typ: TypeInt32, u: uint64(int64(v))} }
func Uint64(v uint64) Value   { return Value{typ: TypeUint64, u: v} }
func Int64(v int64) Value     { return Value{typ: TypeInt64, u: uint64(v)} }
func Float32(v float32) Value { return Value{typ: TypeFloat32, u: math.Float64bits(float64(v))} }
func Float64(v float64) Value { return Value{typ: TypeFloat64, u: math.Float64bits(v)} }
func String(v string) Value   { return Value{typ: TypeString, s: v} }
func Bool(v bool) Value {
	if v {
		return Value{typ: TypeBool, u: 1}
	}
	return Value{typ: TypeBool}
}

// Array constructors; the slice is kept, not copied.

func Strings(v []string) Value   { return Value{typ: TypeArray, elem: TypeString, arr: v} }
func Uint8s(v []uint8) Value     { return Value{typ: TypeArray, elem: TypeUint8, arr: v} }
func Int8s(v []int8) Value       { return Value{typ: TypeArray, elem: TypeInt8, arr: v} }
func Uint16s(v []uint16) Value   { return Value{typ: TypeArray, elem: TypeUint16, arr: v} }
func Int16s(v []int16) Value     { return Value{typ: TypeArray, elem: TypeInt16, arr: v} }
func Uint32s(v []uint32) Value   { return Value{typ: TypeArray, elem: TypeUint32, arr: v} }
func Int32s(v []int32) Value     { return Value{typ: TypeArray, elem: TypeInt32, arr: v} }
func Uint64s(v []uint64) Value   { return Value{typ: TypeArray, elem: TypeUint64, arr: v} }
func Int64s(v []int64) Value     { return Value{typ: TypeArray, elem: TypeInt64, arr: v} }
func Float32s(v []float32) Value { return Value{typ: TypeArray, elem: TypeFloat32, arr: v} }
func Float64s(v []float64) Value { return Value{typ: TypeArray, elem: TypeFloat64, arr: v} }
func Bools(v []bool) Value       { return Value{typ: TypeArray, elem: TypeBool, arr: v} }

// Type is the value's type tag (TypeArray for arrays).
func (v Value) Type() ValueType { return v.typ }

// ElemType is the element type of an array value.
func (v Value) ElemType() ValueType { return v.elem }

// IsArray reports whether v is an array.
func (v Value) IsArray() bool { return v.typ == TypeArray }

func (v Value) isUnsigned() bool {
	return v.typ == TypeUint8 || v.typ == TypeUint16 || v.typ == TypeUint32 || v.typ == TypeUint64
}

func (v Value) isSigned() bool {
	return v.typ == TypeInt8 || v.typ == TypeInt16 || v.typ == TypeInt32 || v.typ == TypeInt64
}

// Uint returns an integer value as uint64; ok is false for non-integers and
// negative signed values.
func (v Value) Uint() (uint64, bool) {
	switch {
	case v.isUnsigned():
		return v.u, true
	case v.isSigned() && int64(v.u) >= 0:
		return v.u, true
	}
	return 0, false
}

// Int returns an integer value as int64; ok is false for non-integers and
// uint64 values above MaxInt64.
func (v Value) Int() (int64, bool) {
	switch {
	case v.isSigned():
		return int64(v.u), true
	case v.isUnsigned() && v.u <= uint64(maxInt64):
		return int64(v.u), true
	}
	return 0, false
}

// Float returns a float32 or float64 value as float64.
func (v Value) Float() (float64, bool) {
	if v.typ == TypeFloat32 || v.typ == TypeFloat64 {
		return math.Float64frombits(v.u), true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) { return v.u != 0, v.typ == TypeBool }

// Str returns a string value.
func (v Value) Str() (string, bool) { return v.s, v.typ == TypeString }

// Len is the number of elements of an array (0 for scalars).
func (v Value) Len() int {
	switch a := v.arr.(type) {
	case []string:
		return len(a)
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float32:
		return len(a)
	case []float64:
		return len(a)
	case []bool:
		return len(a)
	}
	return 0
}

// Array returns the typed Go slice of an array value ([]string, []int32, ...),
// nil for scalars. The slice is shared, not copied.
func (v Value) Array() any { return v.arr }

// Strs returns an array of strings.
func (v Value) Strs() ([]string, bool) { a, ok := v.arr.([]string); return a, ok }

// Float32Array returns an array of float32 (e.g. tokenizer.ggml.scores).
func (v Value) Float32Array() ([]float32, bool) { a, ok := v.arr.([]float32); return a, ok }

// Int32Array returns an array of int32 (e.g. tokenizer.ggml.token_type).
func (v Value) Int32Array() ([]int32, bool) { a, ok := v.arr.([]int32); return a, ok }

// Interface returns the value as a plain Go value (uint8 ... float64, bool,
// string or a slice), e.g. for JSON.
func (v Value) Interface() any {
	switch v.typ {
	case TypeUint8:
		return uint8(v.u)
	case TypeInt8:
		return int8(v.u)
	case TypeUint16:
		return uint16(v.u)
	case TypeInt16:
		return int16(v.u)
	case TypeUint32:
		return uint32(v.u)
	case TypeInt32:
		return int32(v.u)
	case TypeUint64:
		return v.u
	case TypeInt64:
		return int64(v.u)
	case TypeFloat32:
		return float32(math.Float64frombits(v.u))
	case TypeFloat64:
		return math.Float64frombits(v.u)
	case TypeBool:
		return v.u != 0
	case TypeString:
		return v.s
	case TypeArray:
		return v.arr
	}
	return nil
}

// String formats the value for humans; arrays are summarised by type and length.
func (v Value) String() string {
	switch v.typ {
	case TypeArray:
		return fmt.Sprintf("[%d × %s]", v.Len(), v.elem)
	case TypeString:
		return fmt.Sprintf("%q", v.s)
	}
	if x := v.Interface(); x != nil {
		return fmt.Sprint(x)
	}
	return "<invalid>"
}
