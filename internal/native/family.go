package native

import (
	"fmt"
	"math"
	"strings"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/kernels"
)

// Families: the architectures the native graph runs, and what each one
// changes in it. One graph builder (forward.go) reads these switches; the
// math of each is llama.cpp's graph builder of the same name
// (src/models/{llama,qwen2,qwen3,gemma2-iswa,gemma3,phi3}.cpp), the names
// of its tensors and metadata keys llama-arch.cpp's.

// Family is what distinguishes an architecture from llama in the graph.
type Family struct {
	Arch string
	// RopeMode: llama rotates adjacent pairs (RopeNorm); the others rotate
	// the two halves of each head (RopeNeox).
	RopeMode int
	// QKVBias: optional attn_{q,k,v}.bias added after the projections
	// (Qwen2).
	QKVBias bool
	// QKNorm: attn_q_norm / attn_k_norm, an RMSNorm over each head of q
	// and k before RoPE (Qwen3, Gemma 3).
	QKNorm bool
	// PostNorms: post_attention_norm and post_ffw_norm, RMSNorms of the
	// attention and FFN outputs before they join the residual (Gemma 2/3).
	PostNorms bool
	// GeGLU: the FFN gate is gelu (tanh approximation), not silu (Gemma).
	GeGLU bool
	// EmbdScale: the token embeddings are multiplied by √n_embd (Gemma).
	EmbdScale bool
	// QPreScale: q is multiplied by the attention scale before attention,
	// which then uses scale 1 (Gemma, Phi-3; llama scales in the softmax).
	QPreScale bool
	// FusedQKV: one attn_qkv matrix (Phi-3) instead of attn_q/k/v;
	// FusedGateUp: one ffn_up of 2·n_ff rows, gate first (Phi-3).
	FusedQKV, FusedGateUp bool
	// AlwaysTied: the head is always the token embedding; an output.weight
	// in the file is refused (llama.cpp would not load it) (Gemma 2).
	AlwaysTied bool
	// SWAPattern: every SWAPattern-th layer (il % p == p-1) is global, the
	// others slide over the trained window (0: no sliding layers). Gemma 2:
	// 2, Gemma 3: 6, as llama.cpp's set_swa_pattern.
	SWAPattern int
	// SWADefault is the trained window when the file has no
	// attention.sliding_window (Gemma 2: 4096); 0 = no window then.
	SWADefault int
	// SWARopeBase: the sliding layers' own RoPE base and scale (Gemma 3:
	// 10000, 1); 0 = the global layers'.
	SWARopeBase float32
	// AttnSoftcap: attention-logit soft-capping is on (Gemma 2; the cap is
	// attn_logit_softcapping, default 50).
	AttnSoftcap bool
	// LongRoPE: rope_factors_long/short with the original context length
	// choosing between them (Phi-3).
	LongRoPE bool
	// IgnoreSWA: the file's sliding_window is read and not applied, as
	// llama.cpp does (it disabled Phi-3 SWA; the native engine matches the
	// reference it is checked against).
	IgnoreSWA bool
}

// families are the supported architectures.
var families = map[string]*Family{
	"llama": {Arch: "llama", RopeMode: kernels.RopeNorm},
	"qwen2": {Arch: "qwen2", RopeMode: kernels.RopeNeox, QKVBias: true},
	"qwen3": {Arch: "qwen3", RopeMode: kernels.RopeNeox, QKNorm: true},
	"gemma2": {Arch: "gemma2", RopeMode: kernels.RopeNeox, PostNorms: true, GeGLU: true, EmbdScale: true,
		QPreScale: true, AlwaysTied: true, SWAPattern: 2, SWADefault: 4096, AttnSoftcap: true},
	"gemma3": {Arch: "gemma3", RopeMode: kernels.RopeNeox, QKNorm: true, PostNorms: true, GeGLU: true, EmbdScale: true,
		QPreScale: true, SWAPattern: 6, SWARopeBase: 10000},
	"phi3": {Arch: "phi3", RopeMode: kernels.RopeNeox, QPreScale: true, FusedQKV: true, FusedGateUp: true,
		LongRoPE: true, IgnoreSWA: true},
}

// FamilyNames lists the architectures the native engine runs.
func FamilyNames() []string {
	return []string{"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}
}

// Supported reports whether the native engine runs architecture arch.
func Supported(arch string) bool { return families[arch] != nil }

// keyUse is what the loader does with an architecture metadata key.
type keyUse int

const (
	keyRead   keyUse = iota // read into Config (changes the math)
	keyInert                // read by llama.cpp for bookkeeping only: no effect on the graph
	keyRefuse               // changes the math in a way the native graph does not do
)

// archKeys is every "<arch>.<key>" a converted model of a supported family
// may carry and what the loader does with it; a key not listed is refused
// by name (readConfig): the native engine never runs a file whose math it
// may not know. Keys only some families read say so in famKeys.
var archKeys = map[string]keyUse{
	"context_length":                       keyRead,
	"embedding_length":                     keyRead,
	"block_count":                          keyRead,
	"feed_forward_length":                  keyRead,
	"attention.head_count":                 keyRead,
	"attention.head_count_kv":              keyRead,
	"attention.key_length":                 keyRead,
	"attention.value_length":               keyRead,
	"attention.layer_norm_rms_epsilon":     keyRead,
	"rope.dimension_count":                 keyRead,
	"rope.freq_base":                       keyRead,
	"rope.scaling.type":                    keyRead, // none / linear; others refused
	"rope.scaling.factor":                  keyRead,
	"rope.scale_linear":                    keyRead,
	"vocab_size":                           keyInert, // n_vocab is token_embd's row count
	"rope.scaling.finetuned":               keyInert, // llama.cpp: informational
	"pooling_type":                         keyInert, // embeddings only; generation ignores it
	"expert_count":                         keyRefuse,
	"expert_used_count":                    keyRefuse,
	"attention.sliding_window":             keyRead,
	"attn_logit_softcapping":               keyRead,
	"final_logit_softcapping":              keyRead,
	"rope.scaling.attn_factor":             keyRead, // every family: it scales RoPE's cos/sin (llama.cpp: rope_attn_factor)
	"rope.scaling.original_context_length": keyRead,
	"attention.scale":                      keyRefuse,
	"logit_scale":                          keyRefuse,
	"embedding_scale":                      keyRefuse,
	"residual_scale":                       keyRefuse,
	"attention.sliding_window_pattern":     keyRefuse,
	"rope.scaling.yarn_log_multiplier":     keyRefuse,
}

// famKeys are the keys of archKeys only some families read; in a file of
// another family they are refused (the graph would not apply them).
var famKeys = map[string][]string{
	"attention.sliding_window": {"gemma2", "gemma3", "phi3"},
	"attn_logit_softcapping":   {"gemma2"},
	"final_logit_softcapping":  {"gemma2", "gemma3"},
}

// checkArchKeys refuses, by name, every "<arch>." key the native graph
// would not apply.
func checkArchKeys(f *gguf.File, arch string) error {
	p := arch + "."
	for _, kv := range f.KV {
		k, ok := strings.CutPrefix(kv.Key, p)
		if !ok {
			continue
		}
		use, known := archKeys[k]
		switch {
		case !known:
			return fmt.Errorf("%w: metadata key %s is not one the native %s graph knows (refused: it may change the math)", ErrHParams, kv.Key, arch)
		case use == keyRefuse && (k == "expert_count" || k == "expert_used_count") && isZero(kv.Value):
			continue // a dense model that states 0 experts
		case use == keyRefuse:
			return fmt.Errorf("%w: metadata key %s changes the math in a way the native engine does not implement", ErrHParams, kv.Key)
		}
		if fams, ok := famKeys[k]; ok && !contains(fams, arch) {
			return fmt.Errorf("%w: metadata key %s: the %s graph does not apply it", ErrHParams, kv.Key, arch)
		}
	}
	return nil
}

func isZero(v gguf.Value) bool {
	u, ok := v.Uint()
	return ok && u == 0
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// IsSWA reports whether layer il slides over the trained window.
func (c *Config) IsSWA(il int) bool {
	return c.NSWA > 0 && c.Fam.SWAPattern > 0 && il%c.Fam.SWAPattern < c.Fam.SWAPattern-1
}

// ropeOf is layer il's RoPE base and scale (Gemma 3's sliding layers have
// their own).
func (c *Config) ropeOf(il int) (base, scale float32) {
	if c.IsSWA(il) && c.Fam.SWARopeBase > 0 {
		return c.Fam.SWARopeBase, 1
	}
	return c.RopeBase, c.RopeScale
}

// readFamily reads the family-specific hyperparameters of c.Fam.
func (c *Config) readFamily(f *gguf.File, getf func(string, float64) (float32, error), geti func(string, int, bool) (int, error)) error {
	fam := c.Fam
	p := c.Arch + "."
	var err error
	// Trained sliding window.
	if fam.SWAPattern > 0 || fam.IgnoreSWA {
		if c.NSWA, err = geti("attention.sliding_window", fam.SWADefault, false); err != nil {
			return err
		}
		if fam.IgnoreSWA {
			c.NSWA = 0
		}
	}
	if fam.AttnSoftcap {
		if c.AttnSoftcap, err = getf("attn_logit_softcapping", 50); err != nil || c.AttnSoftcap <= 0 {
			return fmt.Errorf("%w: %sattn_logit_softcapping %v", ErrHParams, p, c.AttnSoftcap)
		}
	}
	def := 0.0
	if c.Arch == "gemma2" {
		def = 30
	}
	if c.FinalSoftcap, err = getf("final_logit_softcapping", def); err != nil || c.FinalSoftcap < 0 {
		return fmt.Errorf("%w: %sfinal_logit_softcapping %v", ErrHParams, p, c.FinalSoftcap)
	}
	// Attention scale: 1/√head_dim, except Gemma's 27B (1/√(n_embd/n_head)),
	// as llama.cpp's f_attention_scale, and in its arithmetic: 1.0f/sqrtf(n),
	// a float32 division (1/√n rounded once differs by an ulp for n = 96,
	// Phi-3's head dim: logits off by ~0.02-0.06).
	sqrtInv := func(n int) float32 { return 1 / float32(math.Sqrt(float64(n))) }
	c.AttnScale = sqrtInv(c.HeadDim)
	if (c.Arch == "gemma2" && c.NLayer == 46) || (c.Arch == "gemma3" && c.NLayer == 62) {
		c.AttnScale = sqrtInv(c.NEmbd / c.NHead)
	}
	c.RopeAttnFactor = 1
	c.NCtxOrig = c.NCtxTrain
	if c.NCtxOrig, err = geti("rope.scaling.original_context_length", c.NCtxTrain, false); err != nil || c.NCtxOrig <= 0 {
		return fmt.Errorf("%w: %srope.scaling.original_context_length %d", ErrHParams, p, c.NCtxOrig)
	}
	if c.RopeAttnFactor, err = getf("rope.scaling.attn_factor", 1); err != nil || !(c.RopeAttnFactor > 0) {
		return fmt.Errorf("%w: %srope.scaling.attn_factor %v", ErrHParams, p, c.RopeAttnFactor)
	}
	_, long := f.Tensor("rope_factors_long.weight")
	_, short := f.Tensor("rope_factors_short.weight")
	if (long || short) && !fam.LongRoPE {
		return fmt.Errorf("%w: rope_factors_long/short in a %s file (the %s graph does not apply them)", ErrTensor, c.Arch, c.Arch)
	}
	c.LongRoPE = long || short
	if _, ok := f.Tensor("rope_freqs.weight"); ok && c.Arch != "llama" {
		return fmt.Errorf("%w: rope_freqs.weight in a %s file (the %s graph does not apply it)", ErrTensor, c.Arch, c.Arch)
	}
	return nil
}

// fillSWAMask writes, for the trained sliding layers, the mask of ring rg
// (already in mask, as fillMask wrote it) narrowed to the trained window:
// token i at position p also hides slot j when it holds q ≤ p − nSWA
// (llama.cpp's is_masked_swa, LLAMA_SWA_TYPE_STANDARD). A policy window on
// the ring only narrows further: a sliding layer never sees past its
// trained window, whatever the policy asks.
func fillSWAMask(dst, mask []uint16, rg *kvRing, nKV, n, nTok, nSWA int) {
	copy(dst[:nKV*nTok], mask[:nKV*nTok])
	w := int32(nSWA)
	for i := range nTok {
		row := dst[i*nKV : (i+1)*nKV]
		p := int32(n + i)
		for j := range row {
			if q := rg.slotPos[j]; q >= 0 && p-q >= w {
				row[j] = kernels.F16NegInf
			}
		}
	}
}
