// Package engine defines the types every engine implements (native and
// llamacpp): Engine, Session, Vocab and the values they exchange. It is a
// public leaf package, as wazero's api is: the engine implementations under
// internal/ implement it while package host imports them. Package host
// re-exports every name here (host.Engine is engine.Engine), so an embedding
// app imports host; this package is where `go doc` shows the methods and
// fields.
package engine

import (
	"errors"
	"time"
)

// ErrContextFull is returned (wrapped) by Session.Decode of every engine when
// the batch would go past the session's context: test it with errors.Is.
var ErrContextFull = errors.New("context full")

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
	// Engine is the engine the session was created from: its Vocab and
	// Info.
	Engine() Engine
	// Config is the configuration the session was created with, resolved
	// (SessionConfig.Resolve; Threads as the engine chose it).
	Config() SessionConfig
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
	// ChatTemplate is the model's tokenizer.chat_template ("" if none):
	// the Jinja text host.ApplyChatTemplate matches against llama.cpp's
	// built-in templates.
	ChatTemplate string
	// RepackBytes is the anonymous memory of the weights copied into
	// repacked layouts (LoadOptions.Repack; every weight set on the native
	// engine): not page cache, so not reclaimable under pressure. 0 without
	// repacking or when no weight is eligible (RepackTensors 0).
	RepackBytes   int64
	RepackTensors int
	// RepackHugePageBytes is the part of RepackBytes advised for
	// transparent huge pages (native engine; EDGELLM_REPACK_HUGEPAGES=0
	// turns the advice off): fewer TLB misses when decode streams them.
	// llama.cpp's own buffers are not advised (0).
	RepackHugePageBytes int64
	// RepackLayers and RepackLayersMax are, on the native engine, the units
	// (layers from 0 up, then the output head) whose repacked copy is in
	// use now, and how many have one; RepackInUseBytes is what the ones in
	// use occupy. The rest read the mapped file (LoadOptions.RepackLayers,
	// host.RepackSetter). llama.cpp repacks all or nothing: 0.
	RepackLayers, RepackLayersMax int
	RepackInUseBytes              int64
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

// SessionConfig configures a Session.
type SessionConfig struct {
	NCtx    int    // context length in tokens; 0 = DefaultNCtx capped by the model
	NBatch  int    // max tokens per Decode; 0 = DefaultNBatch
	Threads int    // 0 = all cores
	KVType  KVType // "" = f16
	// Attention selects the attention kernel; the zero value lets the
	// engine choose.
	Attention Attention
}

// DefaultNCtx is the context length of a session that asks for none,
// capped by the model's training context (SessionConfig.Resolve).
const DefaultNCtx = 2048

// DefaultNBatch is the largest Decode batch of a session that asks for
// none, capped by its context.
const DefaultNBatch = 512

// Resolve fills the defaults of c for a model trained on nCtxTrain
// positions: NCtx 0 is min(DefaultNCtx, nCtxTrain), NBatch 0 is
// DefaultNBatch (either capped by NCtx), KVType "" is f16. Threads 0 stays
// 0: each engine picks its thread count. Both engines and host resolve
// with this one function.
func (c SessionConfig) Resolve(nCtxTrain int) SessionConfig {
	if c.NCtx <= 0 {
		c.NCtx = DefaultNCtx
		if nCtxTrain > 0 {
			c.NCtx = min(DefaultNCtx, nCtxTrain)
		}
	}
	if c.NBatch <= 0 {
		c.NBatch = DefaultNBatch
	}
	c.NBatch = min(c.NBatch, c.NCtx)
	if c.KVType == "" {
		c.KVType = KVF16
	}
	return c
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
	// AttentionEdgellm is edgellm's fused attention kernel on the native
	// engine (the llamacpp engine runs flash attention): F32 sums, each query row bitwise the same whatever the batch
	// and thread count, each K and V row read once for all the query rows
	// and heads that attend to it (kernels/RATIONALE.md "Decode
	// attention" has its speed against ggml's). Where it does not
	// apply (a Q8_0/Q4_0 cache, arm64, an x86 CPU without AVX2) the session
	// runs ggml's flash attention. Its logits differ from ggml's flash
	// attention by rounding, as ggml's classic attention's do.
	AttentionEdgellm
)

var attentionNames = [...]string{"auto", "flash", "classic", "edgellm"}

func (a Attention) String() string {
	if int(a) < len(attentionNames) {
		return attentionNames[a]
	}
	return "unknown"
}

// ParseAttention parses "auto", "flash", "classic" or "edgellm" ("" is
// auto).
func ParseAttention(s string) (Attention, error) {
	if s == "" {
		return AttentionAuto, nil
	}
	for i, n := range attentionNames {
		if s == n {
			return Attention(i), nil
		}
	}
	return 0, errors.New("unknown attention " + `"` + s + `"` + " (want auto, flash, classic or edgellm)")
}

// Capabilities is what an engine can do that no session method says:
// speculative decoding, which a draft attached to a session brings. What a
// session can change while decoding (tier, threads, window, per-layer
// windows and weight sets, KV type, repacked layers) is what the session
// implements, and only when the ability is real: the setter interfaces are
// the one source of truth, and no flag here repeats one.
type Capabilities struct {
	// Speculative is true when the engine can decode speculatively, with up
	// to MaxSpeculativeK draft tokens a step, once a draft is attached (the
	// native engine; host.AttachDraft).
	Speculative     bool
	MaxSpeculativeK int
}

// TierSwapper is implemented by sessions that can move to another tier of a
// ladder, migrating their KV state (the llamacpp engine).
type TierSwapper interface {
	SwapTier(to int) (SwapTimings, error)
}

// SwapTimings are the phases of one tier swap: serialise, unload, load,
// restore.
type SwapTimings struct {
	From, To   int
	StateBytes int
	Serialize  time.Duration
	Unload     time.Duration
	Load       time.Duration
	Restore    time.Duration
}

// Total is the whole swap.
func (t SwapTimings) Total() time.Duration { return t.Serialize + t.Unload + t.Load + t.Restore }

// WeightSet describes one weight set of a model loaded with several (the
// native engine's per-layer precision; set 0 is the model file itself).
type WeightSet struct {
	Name string // file base name
	Path string
	// Type is the type of the layers' matrices ("q8_0"), "mixed" when
	// they differ.
	Type string
	// Bits is the nominal precision: BitsPerWeight rounded down (Q8_0 8,
	// Q4_0 4, F16 16).
	Bits int
	// BitsPerWeight is the layers' matrix bytes × 8 / their elements,
	// block scales included (Q8_0 8.5, Q4_0 4.5).
	BitsPerWeight float64
	LayerBytes    int64 // bytes of all layers' tensors in the file
}

// LayerLatency is one sampled step's per-layer timing, as a session that
// measures its layers reports it (the native engine's LastLayerLatency).
type LayerLatency struct {
	Step   int       // Decode count at the sample (1-based)
	Tokens int       // tokens in the sampled batch
	Pos    int       // KV position of the batch's first token (context tokens before it)
	Layers []float64 // per-layer time, µs
	// Embed and Head are the time before layer 0 (embedding lookup) and
	// after the last layer (output norm and head), µs; Total is the whole
	// graph compute measured around it.
	Embed, Head, Total float64
}
