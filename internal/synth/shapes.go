package synth

import (
	"fmt"
	"math"
	"sort"
)

// Shape is the blueprint of a model: llama by default, or one of the other
// families the native engine runs (Arch; families.go).
type Shape struct {
	Name string
	// Arch is general.architecture: "" or llama, qwen2, qwen3, gemma2,
	// gemma3, phi3. It decides the tensor list and the metadata keys,
	// as llama.cpp's convert_hf_to_gguf.py writes them (families.go).
	Arch     string
	NEmbd    int     // embedding length (hidden size)
	NLayer   int     // transformer blocks
	NHead    int     // query heads
	NHeadKV  int     // key/value heads (GQA when < NHead)
	NFF      int     // feed-forward hidden size
	NCtx     int     // training context length
	RopeBase float64 // RoPE frequency base
	RMSEps   float64 // RMSNorm epsilon
	// TiedEmbeddings omits output.weight: llama.cpp then uses token_embd.
	TiedEmbeddings bool
	// Llama3Rope adds rope_freqs.weight, the RoPE frequency factors of
	// Llama 3.1+ "llama3" rope scaling (factor 32, low/high freq factor 1/4,
	// original context 8192), as convert_hf_to_gguf.py computes them.
	Llama3Rope bool
	// KeyLength is the head dim when it is not NEmbd/NHead (Qwen3, Gemma:
	// attention.key_length and value_length); 0 = NEmbd/NHead.
	KeyLength int
	// SlidingWindow is attention.sliding_window (Gemma 2/3: the sliding
	// layers' trained window; Phi-3: written, not applied by llama.cpp).
	SlidingWindow int
	// AttnSoftcap and FinalSoftcap are Gemma 2's soft-caps (written when > 0).
	AttnSoftcap, FinalSoftcap float64
	// OrigCtx is Phi-3's rope.scaling.original_context_length: with it the
	// file carries LongRoPE rope_factors_long/short and rope.scaling.attn_factor.
	OrigCtx int
	// RopeLinear is a linear RoPE scaling factor (rope.scaling.type linear),
	// 0 = none (Gemma 3 4B: 8 on its global layers).
	RopeLinear float64
	// Chat names the family's chat format (ChatFamilies; chat.go): its
	// template and control tokens are added to the vocabulary. "" = none.
	Chat string
	// Vocab is the vocabulary GGUF (under the shared directory) the shape's
	// tokenizer comes from when Options.VocabPath is empty; "" = DefaultVocab.
	Vocab string
}

// ArchName is Arch, "llama" when empty.
func (s Shape) ArchName() string {
	if s.Arch == "" {
		return "llama"
	}
	return s.Arch
}

// Shapes are the named shapes of `edgellm synth --shape`.
var Shapes = map[string]Shape{
	"llama2-7b": {Name: "llama2-7b", NEmbd: 4096, NLayer: 32, NHead: 32, NHeadKV: 32, NFF: 11008,
		NCtx: 4096, RopeBase: 10000, RMSEps: 1e-5},
	"llama3.2-1b": {Name: "llama3.2-1b", NEmbd: 2048, NLayer: 16, NHead: 32, NHeadKV: 8, NFF: 8192,
		NCtx: 131072, RopeBase: 500000, RMSEps: 1e-5, TiedEmbeddings: true, Llama3Rope: true},
	"tinyllama-1.1b": {Name: "tinyllama-1.1b", NEmbd: 2048, NLayer: 22, NHead: 32, NHeadKV: 4, NFF: 5632,
		NCtx: 2048, RopeBase: 10000, RMSEps: 1e-5},
	"tiny": {Name: "tiny", NEmbd: 256, NLayer: 4, NHead: 8, NHeadKV: 4, NFF: 512,
		NCtx: 2048, RopeBase: 10000, RMSEps: 1e-5},
}

// ShapeNames lists the named shapes, sorted.
func ShapeNames() []string {
	names := make([]string, 0, len(Shapes))
	for n := range Shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// HeadDim is KeyLength, else NEmbd / NHead.
func (s Shape) HeadDim() int {
	if s.KeyLength > 0 {
		return s.KeyLength
	}
	return s.NEmbd / s.NHead
}

// Validate checks the shape is one llama.cpp can load.
func (s Shape) Validate() error {
	switch {
	case s.NEmbd <= 0 || s.NLayer <= 0 || s.NHead <= 0 || s.NHeadKV <= 0 || s.NFF <= 0 || s.NCtx <= 0:
		return fmt.Errorf("shape %s: every dimension must be positive: %+v", s.Name, s)
	case !knownArch(s.ArchName()):
		return fmt.Errorf("shape %s: architecture %q (want llama, qwen2, qwen3, gemma2, gemma3, phi3)", s.Name, s.Arch)
	case s.KeyLength == 0 && s.NEmbd%s.NHead != 0:
		return fmt.Errorf("shape %s: n-embd %d is not a multiple of n-head %d", s.Name, s.NEmbd, s.NHead)
	case s.NHead%s.NHeadKV != 0:
		return fmt.Errorf("shape %s: n-head %d is not a multiple of n-head-kv %d", s.Name, s.NHead, s.NHeadKV)
	case s.HeadDim()%2 != 0:
		return fmt.Errorf("shape %s: head dim %d must be even for RoPE", s.Name, s.HeadDim())
	case s.Chat != "" && ChatFamilies[s.Chat].Name == "":
		return fmt.Errorf("shape %s: chat format %q (want one of ChatFamilies)", s.Name, s.Chat)
	case !(s.RopeBase > 0) || !(s.RMSEps > 0):
		return fmt.Errorf("shape %s: rope base %g and rms eps %g must be positive", s.Name, s.RopeBase, s.RMSEps)
	}
	return nil
}

// llama3RopeFactors returns the n_rot/2 frequency factors of "llama3" rope
// scaling (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors).
func llama3RopeFactors(headDim int, base float64) []float32 {
	const factor, lowFreqFactor, highFreqFactor, oldCtx = 32.0, 1.0, 4.0, 8192.0
	lowWavelen, highWavelen := oldCtx/lowFreqFactor, oldCtx/highFreqFactor
	out := make([]float32, headDim/2)
	for i := range out {
		freq := 1 / math.Pow(base, float64(2*i)/float64(headDim))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = factor
		default:
			smooth := (oldCtx/wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}
