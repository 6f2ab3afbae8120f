package host

import (
	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/native"
)

// KVTypeSetter is implemented by sessions that requantize their KV cache
// between steps (the native engine: F16, Q8_0 and Q4_0, in place; going
// back up keeps the precision a smaller type lost).
type KVTypeSetter interface {
	SetKVType(t KVType) (KVChange, error)
}

var _ KVTypeSetter = (*native.Session)(nil)

// KVChange is what one SetKVType call did.
type KVChange = engine.KVChange

// kvRequanter is implemented by engines whose sessions are KVTypeSetters.
type kvRequanter interface{ RequantKVTypes() []engine.KVType }

// kvTypeLimits are the KV types a policy may ask of eng's sessions (nil:
// the type is fixed per session).
func kvTypeLimits(eng Engine) []abi.KVType {
	kr, ok := eng.(kvRequanter)
	if !ok {
		return nil
	}
	var out []abi.KVType
	for _, t := range kr.RequantKVTypes() {
		if k := t.ABI(); k != abi.KVUnknown {
			out = append(out, k)
		}
	}
	return out
}
