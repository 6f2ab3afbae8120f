package synth

import (
	"fmt"
	"math"
	"sort"
)

// Shape is the blueprint of a llama-architecture model.
type Shape struct {
	Name     string
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

// HeadDim is NEmbd / NHead.
func (s Shape) HeadDim() int { return s.NEmbd / s.NHead }

// Validate checks the shape is one llama.cpp can load.
func (s Shape) Validate() error {
	switch {
	case s.NEmbd <= 0 || s.NLayer <= 0 || s.NHead <= 0 || s.NHeadKV <= 0 || s.NFF <= 0 || s.NCtx <= 0:
		return fmt.Errorf("shape %s: every dimension must be positive: %+v", s.Name, s)
	case s.NEmbd%s.NHead != 0:
		return fmt.Errorf("shape %s: n-embd %d is not a multiple of n-head %d", s.Name, s.NEmbd, s.NHead)
	case s.NHead%s.NHeadKV != 0:
		return fmt.Errorf("shape %s: n-head %d is not a multiple of n-head-kv %d", s.Name, s.NHead, s.NHeadKV)
	case s.HeadDim()%2 != 0:
		return fmt.Errorf("shape %s: head dim %d must be even for RoPE", s.Name, s.HeadDim())
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
