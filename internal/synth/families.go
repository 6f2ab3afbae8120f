package synth

import (
	"fmt"
	"math"

	"github.com/edgellm/edgellm/internal/gguf"
)

// The families beyond llama: their shapes, tensor lists and metadata keys,
// as llama.cpp's convert_hf_to_gguf.py writes a converted model of each
// (names from llama-arch.cpp; shapes from llama-model.cpp's create_tensor
// calls), so a synthetic file takes the same loader path as a downloaded
// one. Tokenizers: the shared vocabulary GGUFs; qwen2/qwen3 and SmolLM2
// (whose own BPE vocabularies are not here) use GPT-2's, Gemma (no vocab
// here) Llama's SentencePiece, Phi-3 its own. n_vocab is the vocabulary's.

// Vocabulary files (under the shared directory).
const (
	VocabGPT2 = "models/vocab/ggml-vocab-gpt-2.gguf"
	VocabPhi3 = "models/vocab/ggml-vocab-phi-3.gguf"
)

func knownArch(a string) bool {
	switch a {
	case "llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3":
		return true
	}
	return false
}

// familyShapes are the real shapes (from each model's config.json) and tiny
// variants of each family for tests: a few layers, small dims (phi3-tiny
// keeps Phi-3's vocabulary: llama.cpp looks Phi-3's special tokens up by
// name in a model named phi3), the family's features all on (a short sliding window and small soft-caps so
// they change the numbers within a 256-step test).
var familyShapes = []Shape{
	{Name: "qwen2.5-0.5b", Arch: "qwen2", NEmbd: 896, NLayer: 24, NHead: 14, NHeadKV: 2, NFF: 4864,
		NCtx: 32768, RopeBase: 1e6, RMSEps: 1e-6, TiedEmbeddings: true, Vocab: VocabGPT2, Chat: "qwen2.5"},
	{Name: "qwen2.5-1.5b", Arch: "qwen2", NEmbd: 1536, NLayer: 28, NHead: 12, NHeadKV: 2, NFF: 8960,
		NCtx: 32768, RopeBase: 1e6, RMSEps: 1e-6, TiedEmbeddings: true, Vocab: VocabGPT2, Chat: "qwen2.5"},
	{Name: "qwen3-0.6b", Arch: "qwen3", NEmbd: 1024, NLayer: 28, NHead: 16, NHeadKV: 8, KeyLength: 128, NFF: 3072,
		NCtx: 40960, RopeBase: 1e6, RMSEps: 1e-6, TiedEmbeddings: true, Vocab: VocabGPT2, Chat: "qwen3"},
	{Name: "gemma2-2b", Arch: "gemma2", NEmbd: 2304, NLayer: 26, NHead: 8, NHeadKV: 4, KeyLength: 256, NFF: 9216,
		NCtx: 8192, RopeBase: 10000, RMSEps: 1e-6, TiedEmbeddings: true, SlidingWindow: 4096,
		AttnSoftcap: 50, FinalSoftcap: 30, Chat: "gemma"},
	{Name: "gemma3-1b", Arch: "gemma3", NEmbd: 1152, NLayer: 26, NHead: 4, NHeadKV: 1, KeyLength: 256, NFF: 6912,
		NCtx: 32768, RopeBase: 1e6, RMSEps: 1e-6, TiedEmbeddings: true, SlidingWindow: 512, Chat: "gemma"},
	{Name: "phi3-mini", Arch: "phi3", NEmbd: 3072, NLayer: 32, NHead: 32, NHeadKV: 32, NFF: 8192,
		NCtx: 131072, OrigCtx: 4096, RopeBase: 10000, RMSEps: 1e-5, SlidingWindow: 262144, Vocab: VocabPhi3, Chat: "phi3"},
	{Name: "smollm2-360m", NEmbd: 960, NLayer: 32, NHead: 15, NHeadKV: 5, NFF: 2560,
		NCtx: 8192, RopeBase: 100000, RMSEps: 1e-5, TiedEmbeddings: true, Vocab: VocabGPT2, Chat: "smollm2"},

	{Name: "qwen2-tiny", Arch: "qwen2", NEmbd: 256, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 512,
		NCtx: 2048, RopeBase: 1e6, RMSEps: 1e-6, TiedEmbeddings: true, Chat: "qwen2.5"},
	{Name: "qwen3-tiny", Arch: "qwen3", NEmbd: 256, NLayer: 2, NHead: 4, NHeadKV: 2, KeyLength: 128, NFF: 512,
		NCtx: 2048, RopeBase: 1e6, RMSEps: 1e-6, TiedEmbeddings: true, Chat: "qwen3"},
	{Name: "gemma2-tiny", Arch: "gemma2", NEmbd: 256, NLayer: 4, NHead: 2, NHeadKV: 1, KeyLength: 128, NFF: 512,
		NCtx: 2048, RopeBase: 10000, RMSEps: 1e-6, TiedEmbeddings: true, SlidingWindow: 48,
		AttnSoftcap: 4, FinalSoftcap: 3, Chat: "gemma"},
	{Name: "gemma3-tiny", Arch: "gemma3", NEmbd: 256, NLayer: 6, NHead: 2, NHeadKV: 1, KeyLength: 128, NFF: 512,
		NCtx: 2048, RopeBase: 1e6, RMSEps: 1e-6, TiedEmbeddings: true, SlidingWindow: 48, Chat: "gemma"},
	// Gemma 3 4B's linear RoPE scaling (factor 8) on the global layers only.
	{Name: "gemma3-tiny-linear", Arch: "gemma3", NEmbd: 256, NLayer: 6, NHead: 2, NHeadKV: 1, KeyLength: 128, NFF: 512,
		NCtx: 2048, RopeBase: 1e6, RMSEps: 1e-6, TiedEmbeddings: true, SlidingWindow: 48, RopeLinear: 8, Chat: "gemma"},
	// Phi-3's head dim 96 (where 1/√d rounds differently in float32).
	{Name: "phi3-tiny", Arch: "phi3", NEmbd: 384, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 512,
		NCtx: 4096, OrigCtx: 256, RopeBase: 10000, RMSEps: 1e-5, SlidingWindow: 2047, Vocab: VocabPhi3, Chat: "phi3"},
	{Name: "smollm2-tiny", NEmbd: 192, NLayer: 2, NHead: 3, NHeadKV: 1, NFF: 512,
		NCtx: 2048, RopeBase: 100000, RMSEps: 1e-5, TiedEmbeddings: true, Chat: "smollm2"},
}

func init() {
	for _, s := range familyShapes {
		Shapes[s.Name] = s
	}
}

// archKVs are the "<arch>.*" hyperparameters of s, the keys the family's
// converter writes.
func archKVs(s Shape, nTokens int) []gguf.KV {
	a := s.ArchName()
	u := func(k string, v int) gguf.KV { return gguf.KV{Key: a + "." + k, Value: gguf.Uint32(uint32(v))} }
	f := func(k string, v float64) gguf.KV { return gguf.KV{Key: a + "." + k, Value: gguf.Float32(float32(v))} }
	if a == "llama" { // the order edgellm has always written (hashed by tests)
		kvs := []gguf.KV{u("vocab_size", nTokens), u("context_length", s.NCtx), u("embedding_length", s.NEmbd),
			u("block_count", s.NLayer), u("feed_forward_length", s.NFF), u("attention.head_count", s.NHead),
			u("attention.head_count_kv", s.NHeadKV), u("rope.dimension_count", s.HeadDim()),
			f("rope.freq_base", s.RopeBase), f("attention.layer_norm_rms_epsilon", s.RMSEps)}
		if s.RopeLinear > 0 {
			kvs = append(kvs, gguf.KV{Key: a + ".rope.scaling.type", Value: gguf.String("linear")}, f("rope.scaling.factor", s.RopeLinear))
		}
		return kvs
	}
	kvs := []gguf.KV{
		u("context_length", s.NCtx), u("embedding_length", s.NEmbd), u("block_count", s.NLayer),
		u("feed_forward_length", s.NFF), u("attention.head_count", s.NHead), u("attention.head_count_kv", s.NHeadKV),
	}
	switch a {
	case "qwen2", "qwen3", "gemma3":
		kvs = append(kvs, f("rope.freq_base", s.RopeBase))
	case "gemma2": // the converter writes no rope base: 10000 is the default
		if s.RopeBase != 10000 {
			kvs = append(kvs, f("rope.freq_base", s.RopeBase))
		}
	case "phi3":
		kvs = append(kvs, u("rope.dimension_count", s.HeadDim()), f("rope.freq_base", s.RopeBase))
	}
	kvs = append(kvs, f("attention.layer_norm_rms_epsilon", s.RMSEps))
	if s.KeyLength > 0 {
		kvs = append(kvs, u("attention.key_length", s.KeyLength), u("attention.value_length", s.KeyLength))
	}
	if s.SlidingWindow > 0 {
		kvs = append(kvs, u("attention.sliding_window", s.SlidingWindow))
	}
	if s.AttnSoftcap > 0 {
		kvs = append(kvs, f("attn_logit_softcapping", s.AttnSoftcap))
	}
	if s.FinalSoftcap > 0 {
		kvs = append(kvs, f("final_logit_softcapping", s.FinalSoftcap))
	}
	if s.RopeLinear > 0 {
		kvs = append(kvs, gguf.KV{Key: a + ".rope.scaling.type", Value: gguf.String("linear")}, f("rope.scaling.factor", s.RopeLinear))
	}
	if s.OrigCtx > 0 {
		kvs = append(kvs, u("rope.scaling.original_context_length", s.OrigCtx), f("rope.scaling.attn_factor", longRopeAttnFactor(s)))
	}
	return kvs
}

// longRopeAttnFactor is Phi-3's LongRoPE attention factor,
// √(1 + ln(scale)/ln(orig)) for scale = ctx/orig > 1 (the converter's).
func longRopeAttnFactor(s Shape) float64 {
	scale := float64(s.NCtx) / float64(s.OrigCtx)
	if scale <= 1 {
		return 1
	}
	return math.Sqrt(1 + math.Log(scale)/math.Log(float64(s.OrigCtx)))
}

// longRopeFactors are SYNTHETIC LongRoPE factors of the real ones' form:
// rising from 1 over the n_rot/2 frequencies, to top (the short ones stay
// near 1, the long ones reach tens).
func longRopeFactors(headDim int, top float64) []float32 {
	out := make([]float32, headDim/2)
	for i := range out {
		x := float64(i) / float64(max(1, len(out)-1))
		out[i] = float32(1 + (top-1)*x*x)
	}
	return out
}

// planFamily lists the tensors of a non-llama model of shape s (see plan
// for the scales). Norm weights are 1 (Gemma's converter stores 1 + w, so a
// trained w = 0 is 1 in the file too); Qwen2's q/k/v biases are random so
// that they matter.
func planFamily(s Shape, t gguf.Type, nVocab int) []tensorSpec {
	a := s.ArchName()
	e, ff, v := int64(s.NEmbd), int64(s.NFF), int64(nVocab)
	hd := int64(s.HeadDim())
	q, kv := hd*int64(s.NHead), hd*int64(s.NHeadKV)
	ones := func(n int64) []float32 {
		o := make([]float32, n)
		for i := range o {
			o[i] = 1
		}
		return o
	}
	in := 1 / math.Sqrt(float64(e))
	resid := 1 / math.Sqrt(2*float64(s.NLayer))
	specs := []tensorSpec{{name: "token_embd.weight", dims: []int64{e, v}, typ: t, std: in}}
	if s.OrigCtx > 0 {
		specs = append(specs,
			tensorSpec{name: "rope_factors_long.weight", dims: []int64{hd / 2}, typ: gguf.F32, values: longRopeFactors(int(hd), 40)},
			tensorSpec{name: "rope_factors_short.weight", dims: []int64{hd / 2}, typ: gguf.F32, values: longRopeFactors(int(hd), 2.5)})
	}
	gemma := a == "gemma2" || a == "gemma3"
	for i := 0; i < s.NLayer; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		mat := func(n string, d0, d1 int64, std float64) tensorSpec {
			return tensorSpec{name: p + n + ".weight", dims: []int64{d0, d1}, typ: t, std: std}
		}
		vec := func(n string, d int64) tensorSpec {
			return tensorSpec{name: p + n, dims: []int64{d}, typ: gguf.F32, values: ones(d)}
		}
		specs = append(specs, vec("attn_norm.weight", e))
		if a == "phi3" {
			specs = append(specs, mat("attn_qkv", e, q+2*kv, in))
		} else {
			specs = append(specs, mat("attn_q", e, q, in), mat("attn_k", e, kv, in), mat("attn_v", e, kv, in))
		}
		if a == "qwen2" {
			for _, b := range []struct {
				n string
				d int64
			}{{"attn_q.bias", q}, {"attn_k.bias", kv}, {"attn_v.bias", kv}} {
				specs = append(specs, tensorSpec{name: p + b.n, dims: []int64{b.d}, typ: gguf.F32, std: 0.5})
			}
		}
		if a == "qwen3" || a == "gemma3" {
			specs = append(specs, vec("attn_q_norm.weight", hd), vec("attn_k_norm.weight", hd))
		}
		specs = append(specs, mat("attn_output", q, e, resid/math.Sqrt(float64(q))))
		if gemma {
			specs = append(specs, vec("post_attention_norm.weight", e))
		}
		specs = append(specs, vec("ffn_norm.weight", e))
		if a == "phi3" {
			specs = append(specs, mat("ffn_up", e, 2*ff, in))
		} else {
			specs = append(specs, mat("ffn_gate", e, ff, in), mat("ffn_up", e, ff, in))
		}
		specs = append(specs, mat("ffn_down", ff, e, resid/math.Sqrt(float64(ff))))
		if gemma {
			specs = append(specs, vec("post_ffw_norm.weight", e))
		}
	}
	specs = append(specs, tensorSpec{name: "output_norm.weight", dims: []int64{e}, typ: gguf.F32, values: ones(e)})
	if !s.TiedEmbeddings && a != "gemma2" {
		specs = append(specs, tensorSpec{name: "output.weight", dims: []int64{e, v}, typ: t, std: 0.5 * in})
	}
	return specs
}
