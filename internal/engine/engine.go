// Package engine defines the interfaces every engine implements (native and
// llamacpp). It is a leaf package so engine implementations under internal/
// can implement it while package host imports them; host re-exports every
// name here as an alias, and users should use those.
package engine

import "errors"

// Engine is a loaded model behind one of edgellm's two implementations:
// "native" (our own forward pass over memory we own) and "llamacpp" (llama.cpp's
// llama_decode, the reference). An Engine is safe for use by one goroutine at a
// time; Sessions created from it must be closed before it.
type Engine interface {
	// Name is "native" or "llamacpp".
	Name() string
	// Info describes the loaded model.
	Info() ModelInfo
	// Vocab is the model's tokenizer.
	Vocab() Vocab
	// Capabilities says which adaptive decisions this engine can apply.
	Capabilities() Capabilities
	// NewSession creates a sequence with its own KV cache.
	NewSession(cfg SessionConfig) (Session, error)
	// Close releases the model. All sessions must be closed first.
	Close() error
}

// Session is one sequence being decoded: its KV cache and its position.
//
// Positions are 0-based; the session holds KV for positions [0, Len()).
type Session interface {
	// Decode evaluates tokens at positions [Len(), Len()+len(tokens)) as one
	// batch (prefill, or speculative verify) and advances Len. Logits are kept
	// for the batch positions selected by want: LogitsLast (only the final
	// token) or LogitsAll (every token of the batch, for verify).
	Decode(tokens []int32, want LogitsMode) error
	// Logits copies the logits of the i-th token of the last Decode batch into
	// dst (len n_vocab) without allocating. i counts within that batch; for
	// LogitsLast only i = len(tokens)-1 is valid.
	Logits(i int, dst []float32) error
	// Len is the number of positions in the KV cache.
	Len() int
	// Truncate drops positions [n, Len()): rollback of rejected draft tokens.
	Truncate(n int) error
	// Close releases the session's KV cache.
	Close() error
}

// LogitsMode selects which batch positions keep logits.
type LogitsMode int

const (
	// LogitsLast keeps logits for the last token of the batch only.
	LogitsLast LogitsMode = iota
	// LogitsAll keeps logits for every token of the batch.
	LogitsAll
)

// ModelInfo is the blueprint of a loaded model.
type ModelInfo struct {
	Path        string
	Arch        string // general.architecture, e.g. "llama"
	Name        string // general.name, if present
	NVocab      int
	NCtxTrain   int
	NEmbd       int
	NLayer      int
	NHead       int
	NHeadKV     int
	NFF         int
	FileBytes   int64
	ParamCount  int64
	FileType    string // e.g. "Q4_0", "F32", "mostly Q8_0"
	Description string // llama_model_desc or equivalent
}

// Vocab tokenizes and detokenizes.
type Vocab interface {
	// Tokenize converts text to tokens, adding BOS (and other special tokens
	// the model wants) when addSpecial is true.
	Tokenize(text string, addSpecial bool) ([]int32, error)
	// Piece appends the text of one token to dst and returns it (no allocation
	// when dst has room).
	Piece(dst []byte, tok int32) []byte
	BOS() int32
	EOS() int32
	// IsEOG reports whether tok ends generation (EOS, EOT, ...).
	IsEOG(tok int32) bool
	NVocab() int
}

// KVType is the element type of the KV cache.
type KVType string

const (
	KVF16  KVType = "f16"
	KVF32  KVType = "f32"
	KVQ8_0 KVType = "q8_0" // INT8, group 32: 8.5 bits per value
	KVQ4_0 KVType = "q4_0" // INT4, group 32: 4.5 bits per value
)

// ParseKVType validates a KV type name.
func ParseKVType(s string) (KVType, error) {
	switch t := KVType(s); t {
	case KVF16, KVF32, KVQ8_0, KVQ4_0:
		return t, nil
	}
	return "", errors.New("unknown KV type " + `"` + s + `"` + " (want f16, f32, q8_0 or q4_0)")
}

// SessionConfig configures a Session.
type SessionConfig struct {
	NCtx    int    // context length in tokens; 0 = 2048 capped by the model
	NBatch  int    // max tokens per Decode; 0 = 512
	Threads int    // 0 = all cores
	KVType  KVType // "" = f16
	// Attention selects the attention kernel; the zero value lets the
	// engine choose.
	Attention Attention
}

// Attention selects how a session computes attention.
type Attention uint8

// Attention kernels. Both engines answer AttentionAuto with flash attention
// on the CPU (llama.cpp's flash_attn_type auto resolves to enabled there),
// so an unset config compares like with like.
const (
	AttentionAuto    Attention = iota // the engine's choice: flash attention on CPU
	AttentionFlash                    // ggml_flash_attn_ext
	AttentionClassic                  // softmax(Q Kᵀ) V as separate ops
)

var attentionNames = [...]string{"auto", "flash", "classic"}

func (a Attention) String() string {
	if int(a) < len(attentionNames) {
		return attentionNames[a]
	}
	return "unknown"
}

// ParseAttention parses "auto", "flash" or "classic" ("" is auto).
func ParseAttention(s string) (Attention, error) {
	if s == "" {
		return AttentionAuto, nil
	}
	for i, n := range attentionNames {
		if s == n {
			return Attention(i), nil
		}
	}
	return 0, errors.New("unknown attention " + `"` + s + `"` + " (want auto, flash or classic)")
}

// Capabilities is what an engine can change while decoding; the policy runtime
// clamps decisions to them.
type Capabilities struct {
	TierSwap        bool // switch tier (llamacpp: with KV migration; native: pointer switch)
	PerLayerPrec    bool // per-layer weight precision
	SlidingWindow   bool // ring KV with anchors
	PerLayerWindow  bool
	KVTypes         []KVType
	Speculative     bool
	MaxSpeculativeK int
}
