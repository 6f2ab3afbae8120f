package engine

import (
	"errors"

	"github.com/edgellm/edgellm/abi"
)

// KVType is the element type of the KV cache. It is edgellm's one KV type:
// kernels converts it to ggml's (kernels.KVGGMLType), and a policy's
// Decision carries it as the wire enum abi.KVType (KVType.ABI and
// KVTypeFromABI are the only conversions).
type KVType string

// KV cache types.
const (
	KVF16  KVType = "f16"
	KVF32  KVType = "f32"
	KVQ8_0 KVType = "q8_0" // INT8, group 32: 8.5 bits per value
	KVQ4_0 KVType = "q4_0" // INT4, group 32: 4.5 bits per value
)

// kvWire pairs each KV type with its ABI value.
var kvWire = [...]struct {
	t KVType
	w abi.KVType
}{{KVF16, abi.KVF16}, {KVF32, abi.KVF32}, {KVQ8_0, abi.KVQ8_0}, {KVQ4_0, abi.KVQ4_0}}

// ParseKVType validates a KV type name.
func ParseKVType(s string) (KVType, error) {
	for _, p := range kvWire {
		if string(p.t) == s {
			return p.t, nil
		}
	}
	return "", errors.New("unknown KV type " + `"` + s + `"` + " (want f16, f32, q8_0 or q4_0)")
}

// ABI is t's wire value in a policy Decision; "" and unknown names are
// abi.KVUnknown ("leave the type as it is").
func (t KVType) ABI() abi.KVType {
	for _, p := range kvWire {
		if p.t == t {
			return p.w
		}
	}
	return abi.KVUnknown
}

// KVTypeFromABI is the KV type of a Decision's wire value; abi.KVUnknown and
// values outside the enum are "".
func KVTypeFromABI(k abi.KVType) KVType {
	for _, p := range kvWire {
		if p.w == k {
			return p.t
		}
	}
	return ""
}
