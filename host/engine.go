package host

import "github.com/edgellm/edgellm/host/engine"

// The engine types are defined in the public leaf package host/engine (so
// the engine implementations under internal/ can implement them while this
// package imports those implementations); these are their names here. `go
// doc github.com/edgellm/edgellm/host/engine` shows their methods and fields.
type (
	// Engine is a loaded model behind one of edgellm's two implementations:
	// "native" (our own forward pass over memory we own) and "llamacpp"
	// (llama.cpp's llama_decode, the reference).
	Engine = engine.Engine
	// Session is one sequence being decoded: its KV cache and its position.
	Session = engine.Session
	// Vocab tokenizes and detokenizes.
	Vocab = engine.Vocab
	// ModelInfo is the blueprint of a loaded model.
	ModelInfo = engine.ModelInfo
	// SessionConfig configures a Session.
	SessionConfig = engine.SessionConfig
	// Capabilities is what an engine can do that no session method says
	// (speculative decoding).
	Capabilities = engine.Capabilities
	// LogitsMode selects which batch positions keep logits.
	LogitsMode = engine.LogitsMode
	// KVType is the element type of the KV cache.
	KVType = engine.KVType
	// Attention selects the attention kernel of a session.
	Attention = engine.Attention
	// TierSwapper is implemented by sessions that can move to another tier
	// of a ladder, migrating their KV state (the llamacpp engine).
	TierSwapper = engine.TierSwapper
	// StateSaver is implemented by sessions whose KV state can be saved and
	// restored without decoding again (both engines; not a native session
	// sharing its KV arena with a draft model).
	StateSaver = engine.StateSaver
	// StateHeader opens a saved session state.
	StateHeader = engine.StateHeader
	// SwapTimings are the phases of one tier swap.
	SwapTimings = engine.SwapTimings
)

// Batch positions that keep logits, KV cache types and attention kernels.
const (
	LogitsLast = engine.LogitsLast
	LogitsAll  = engine.LogitsAll

	KVF16  = engine.KVF16
	KVF32  = engine.KVF32
	KVQ8_0 = engine.KVQ8_0
	KVQ4_0 = engine.KVQ4_0

	AttentionAuto    = engine.AttentionAuto
	AttentionFlash   = engine.AttentionFlash
	AttentionClassic = engine.AttentionClassic
	AttentionEdgellm = engine.AttentionEdgellm
)

// ErrContextFull is returned (wrapped) by Session.Decode and Generate of
// both engines when the prompt plus generated tokens would exceed the
// session's context.
var ErrContextFull = engine.ErrContextFull

// ErrBadState wraps (errors.Is) every StateSaver.RestoreState error about
// the saved bytes: truncated, corrupt, or of another engine, model or KV
// type.
var ErrBadState = engine.ErrBadState

// ParseAttention validates an attention kernel name (auto, flash, classic,
// edgellm).
func ParseAttention(s string) (Attention, error) { return engine.ParseAttention(s) }

// ParseKVType validates a KV type name.
func ParseKVType(s string) (KVType, error) { return engine.ParseKVType(s) }
