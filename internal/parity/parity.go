// Package parity compares the two engines' logits on the same tokens
// (llama.cpp is the reference), and the native engine against itself with
// a quantized KV cache. It sits above both engines: neither imports the
// other.
package parity

import (
	"fmt"
	"math"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/llamacpp"
	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/kernels"
)

// Options configures Parity.
type Options struct {
	N       int     // greedy steps compared (logit vectors), ≥ 1
	Prompt  []int32 // nil = [BOS]
	Threads int
	// KVType is the native engine's KV type. The llama.cpp reference uses F32
	// when KVType is f32 and F16 otherwise: quantized KV is compared against
	// the F16 reference.
	KVType engine.KVType
	// Attention is the kernel of both engines; auto is flash attention (what
	// both engines choose on the CPU).
	Attention engine.Attention
	// Repack repacks the weights of both engines (Options.Repack,
	// llama.cpp's use_extra_bufts): the same interleaved kernels on both
	// sides, so the comparison stays like with like.
	Repack bool
	// SameKV gives the reference the native engine's KV type also when it
	// is quantized (Q8_0/Q4_0 compared like with like; llama.cpp needs
	// flash attention for a quantized V cache).
	SameKV bool
}

// flash resolves the attention setting shared by both engines of a
// comparison into an explicit kernel: auto is flash on the CPU; edgellm
// stays (the native engine runs edgellm's kernel, llama.cpp flash
// attention).
func flash(a engine.Attention) engine.Attention {
	if a == engine.AttentionClassic || a == engine.AttentionEdgellm {
		return a
	}
	return engine.AttentionFlash
}

// loadReference loads the llama.cpp engine a comparison measures against:
// the same weights, repacked when the native engine's are (Options.Repack):
// like is compared with like, both engines run the same ggml kernels.
func loadReference(path string, repack bool) (*llamacpp.Engine, error) {
	return llamacpp.Load(path, llamacpp.Options{Repack: repack})
}

// Result compares the native engine's logits with llama.cpp's on the
// same tokens. Both engines are fed the reference's greedy tokens, so one
// disagreement does not derail the rest of the comparison.
type Result struct {
	N               int     `json:"n"`
	Top1Agreement   float64 `json:"top1_agreement"`
	MaxAbsLogitDiff float64 `json:"max_abs_logit_diff"`
	KLMean          float64 `json:"kl_mean"` // mean KL(reference ‖ native), nats
	KLMax           float64 `json:"kl_max"`
	KVType          string  `json:"kv_type"`
	RefKVType       string  `json:"ref_kv_type"`
	Attention       string  `json:"attention"` // flash or classic, both engines
	Tokens          []int32 `json:"tokens"`    // the reference's greedy tokens
	Repack          bool    `json:"repack"`    // both engines' weights repacked
}

// Parity runs llama.cpp and the native engine on the model at path.
func Parity(path string, o Options) (*Result, error) {
	if o.N < 1 {
		return nil, fmt.Errorf("parity: n = %d (want ≥ 1)", o.N)
	}
	kvType, err := kvName(o.KVType)
	if err != nil {
		return nil, err
	}
	refKV := engine.KVF16
	if kvType == engine.KVF32 {
		refKV = engine.KVF32
	}
	if o.SameKV && o.KVType != "" {
		refKV = o.KVType
	}
	eng, err := native.Load(path, native.Options{Threads: o.Threads, NoVocab: true, Repack: o.Repack})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	le, err := loadReference(path, o.Repack)
	if err != nil {
		return nil, err
	}
	defer le.Close()
	prompt := o.Prompt
	if len(prompt) == 0 {
		prompt = []int32{le.Vocab().BOS()}
	}
	nCtx := len(prompt) + o.N
	if nCtx > eng.Config().NCtxTrain {
		return nil, fmt.Errorf("parity: %d prompt + %d tokens exceed the model's context %d", len(prompt), o.N, eng.Config().NCtxTrain)
	}
	att := flash(o.Attention)
	ref, err := le.NewSession(engine.SessionConfig{NCtx: nCtx, NBatch: max(len(prompt), 1), Threads: o.Threads,
		KVType: refKV, Attention: att})
	if err != nil {
		return nil, err
	}
	defer ref.Close()
	sess, err := eng.NewSession(engine.SessionConfig{NCtx: nCtx, NBatch: len(prompt), Threads: o.Threads,
		KVType: o.KVType, Attention: att})
	if err != nil {
		return nil, err
	}
	defer sess.Close()

	res, err := compareSessions(ref, sess, prompt, o.N, eng.Config().NVocab)
	if err != nil {
		return nil, err
	}
	res.KVType, res.RefKVType, res.Attention = string(kvType), string(refKV), att.String()
	res.Repack = o.Repack
	return res, nil
}

// CompareKV runs the native engine twice on the same tokens, with F16 KV
// (the reference) and with kv, and compares their logits: the cost of KV
// quantization.
func CompareKV(path string, kv engine.KVType, o Options) (*Result, error) {
	eng, err := native.Load(path, native.Options{Threads: o.Threads, NoVocab: true, Repack: o.Repack})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	prompt := o.Prompt
	if len(prompt) == 0 {
		prompt = []int32{1}
	}
	nCtx := len(prompt) + o.N
	att := flash(o.Attention)
	mk := func(t engine.KVType) (engine.Session, error) {
		return eng.NewSession(engine.SessionConfig{NCtx: nCtx, NBatch: len(prompt), Threads: o.Threads, KVType: t, Attention: att})
	}
	ref, err := mk(engine.KVF16)
	if err != nil {
		return nil, err
	}
	defer ref.Close()
	cand, err := mk(kv)
	if err != nil {
		return nil, err
	}
	defer cand.Close()
	res, err := compareSessions(ref, cand, prompt, o.N, eng.Config().NVocab)
	if err != nil {
		return nil, err
	}
	res.KVType, res.RefKVType, res.Attention = string(kv), "f16 (native)", att.String()
	return res, nil
}

// compareSessions feeds both sessions the prompt and then the reference's
// greedy tokens for n steps, comparing the last-token logits at each step.
func compareSessions(ref, cand engine.Session, prompt []int32, n, nv int) (*Result, error) {
	lr, lc := make([]float32, nv), make([]float32, nv)
	res := &Result{N: n}
	toks := prompt
	agree := 0
	for step := 0; step < n; step++ {
		if err := ref.Decode(toks, engine.LogitsLast); err != nil {
			return nil, fmt.Errorf("reference decode at %d: %w", ref.Len(), err)
		}
		if err := cand.Decode(toks, engine.LogitsLast); err != nil {
			return nil, fmt.Errorf("native decode at %d: %w", cand.Len(), err)
		}
		if err := ref.Logits(len(toks)-1, lr); err != nil {
			return nil, err
		}
		if err := cand.Logits(len(toks)-1, lc); err != nil {
			return nil, err
		}
		tr, tc := kernels.Argmax(lr), kernels.Argmax(lc)
		if tr == tc {
			agree++
		}
		for i := range lr {
			if d := math.Abs(float64(lr[i] - lc[i])); d > res.MaxAbsLogitDiff || math.IsNaN(d) {
				res.MaxAbsLogitDiff = d
			}
		}
		kl := sample.KL(lr, lc)
		res.KLMean += kl
		res.KLMax = max(res.KLMax, kl)
		res.Tokens = append(res.Tokens, tr)
		toks = res.Tokens[len(res.Tokens)-1:]
	}
	res.KLMean /= float64(n)
	res.Top1Agreement = float64(agree) / float64(n)
	return res, nil
}

// kvName validates a KV type name ("" is f16, the engines' default).
func kvName(t engine.KVType) (engine.KVType, error) {
	if t == "" {
		return engine.KVF16, nil
	}
	return engine.ParseKVType(string(t))
}
