package native

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/kernels"
)

// Errors. Every load error wraps one of these and names the file.
var (
	// ErrArch: the model is not a llama-architecture model.
	ErrArch = errors.New("unsupported architecture")
	// ErrHParams: a hyperparameter is missing or out of range.
	ErrHParams = errors.New("bad hyperparameters")
	// ErrTensor: a tensor is missing, mis-shaped, of an unsupported type or
	// outside the file.
	ErrTensor = errors.New("bad tensor")
	// ErrBadToken: a token id outside [0, n_vocab).
	ErrBadToken = errors.New("token id out of range")
	// ErrNoLogits: Logits asked for a batch index without logits.
	ErrNoLogits = errors.New("no logits for this batch index")
	// ErrClosed: the engine or session is closed.
	ErrClosed = errors.New("native: closed")
)

// Config is the blueprint of a llama model, read from GGUF metadata.
type Config struct {
	Arch      string
	NVocab    int
	NCtxTrain int
	NEmbd     int
	NLayer    int
	NHead     int
	NHeadKV   int
	HeadDim   int // n_embd_head_k = n_embd_head_v = n_rot
	NFF       int
	NormEps   float32
	RopeBase  float32
	RopeScale float32 // ggml freq_scale (1/linear factor)
	// RopeFreqs is true when the file has llama-3 rope_freqs.weight.
	RopeFreqs bool

	// Fam is the architecture's graph switches (family.go).
	Fam *Family
	// NSWA is the trained sliding window of the sliding layers (IsSWA);
	// 0 = every layer global.
	NSWA int
	// AttnScale is the attention scale (1/√head_dim for all but Gemma 27B).
	AttnScale float32
	// AttnSoftcap and FinalSoftcap are Gemma 2's soft-caps of the attention
	// logits and of the output logits (0 = off).
	AttnSoftcap, FinalSoftcap float32
	// NCtxOrig is the original training context (Phi-3 LongRoPE: a session
	// longer than it uses rope_factors_long, else rope_factors_short).
	NCtxOrig int
	// RopeAttnFactor is rope.scaling.attn_factor (Phi-3 LongRoPE), 1 if absent.
	RopeAttnFactor float32
	// LongRoPE is true when the file has rope_factors_long/short.
	LongRoPE bool
}

// NEmbdKV is the width of one K (or V) row: n_head_kv * head_dim.
func (c *Config) NEmbdKV() int { return c.NHeadKV * c.HeadDim }

// readConfig extracts and validates the llama hyperparameters.
func readConfig(f *gguf.File) (Config, error) {
	c := Config{Arch: f.Arch()}
	if c.Fam = families[c.Arch]; c.Fam == nil {
		return c, fmt.Errorf("%w %q (native engine: %s)", ErrArch, c.Arch, strings.Join(FamilyNames(), ", "))
	}
	if err := checkArchKeys(f, c.Arch); err != nil {
		return c, err
	}
	p := c.Arch + "."
	geti := func(key string, def int, required bool) (int, error) {
		v, err := f.GetUint(p + key)
		if err != nil {
			if !required {
				if _, ok := f.Get(p + key); !ok {
					return def, nil
				}
			}
			return 0, fmt.Errorf("%w: %s: %v", ErrHParams, p+key, err)
		}
		if v > 1<<24 {
			return 0, fmt.Errorf("%w: %s = %d", ErrHParams, p+key, v)
		}
		return int(v), nil
	}
	getf := func(key string, def float64) (float32, error) {
		if _, ok := f.Get(p + key); !ok {
			return float32(def), nil
		}
		v, err := f.GetFloat(p + key)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%w: %s: %v", ErrHParams, p+key, err)
		}
		return float32(v), nil
	}
	var err error
	if c.NLayer, err = geti("block_count", 0, true); err != nil {
		return c, err
	}
	if c.NEmbd, err = geti("embedding_length", 0, true); err != nil {
		return c, err
	}
	if c.NFF, err = geti("feed_forward_length", 0, true); err != nil {
		return c, err
	}
	if c.NHead, err = geti("attention.head_count", 0, true); err != nil {
		return c, err
	}
	if c.NHeadKV, err = geti("attention.head_count_kv", c.NHead, false); err != nil {
		return c, err
	}
	// Required: a context length guessed for a model that does not state
	// one would let a user run past what it was trained on.
	if c.NCtxTrain, err = geti("context_length", 0, true); err != nil {
		return c, err
	}
	if c.NLayer <= 0 || c.NEmbd <= 0 || c.NFF <= 0 || c.NHead <= 0 || c.NHeadKV <= 0 || c.NCtxTrain <= 0 {
		return c, fmt.Errorf("%w: layers %d, n_embd %d, n_ff %d, heads %d/%d, ctx %d", ErrHParams,
			c.NLayer, c.NEmbd, c.NFF, c.NHead, c.NHeadKV, c.NCtxTrain)
	}
	if c.NHead%c.NHeadKV != 0 {
		return c, fmt.Errorf("%w: heads %d, kv heads %d do not divide", ErrHParams, c.NHead, c.NHeadKV)
	}
	// The head dim is attention.key_length when present (Qwen3, Gemma:
	// n_head·head_dim need not be n_embd), else n_embd/n_head.
	c.HeadDim = c.NEmbd / c.NHead
	if c.HeadDim, err = geti("attention.key_length", c.HeadDim, false); err != nil || c.HeadDim <= 0 {
		return c, fmt.Errorf("%w: attention.key_length %d", ErrHParams, c.HeadDim)
	}
	if _, ok := f.Get(p + "attention.key_length"); !ok && c.NEmbd%c.NHead != 0 {
		return c, fmt.Errorf("%w: n_embd %d is not a multiple of %d heads (and no attention.key_length)", ErrHParams, c.NEmbd, c.NHead)
	}
	if v, err := geti("attention.value_length", c.HeadDim, false); err != nil || v != c.HeadDim {
		return c, fmt.Errorf("%w: attention.value_length %d != key_length %d", ErrHParams, v, c.HeadDim)
	}
	if r, err := geti("rope.dimension_count", c.HeadDim, false); err != nil || r != c.HeadDim {
		return c, fmt.Errorf("%w: rope.dimension_count %d != head dim %d (partial RoPE unsupported)", ErrHParams, r, c.HeadDim)
	}
	if c.HeadDim%2 != 0 {
		return c, fmt.Errorf("%w: odd head dim %d", ErrHParams, c.HeadDim)
	}
	if c.NormEps, err = getf("attention.layer_norm_rms_epsilon", 1e-5); err != nil {
		return c, err
	}
	if c.RopeBase, err = getf("rope.freq_base", 10000); err != nil {
		return c, err
	}
	// As llama.cpp: the scaling type defaults to linear; its factor is
	// rope.scaling.factor, else the older rope.scale_linear; none is 1.
	c.RopeScale = 1
	st := "linear"
	if _, ok := f.Get(p + "rope.scaling.type"); ok {
		if st, err = f.GetString(p + "rope.scaling.type"); err != nil {
			return c, fmt.Errorf("%w: rope.scaling.type: %v", ErrHParams, err)
		}
	}
	switch st {
	case "none":
	case "linear":
		factor, err := getf("rope.scaling.factor", 0)
		if err == nil && factor == 0 {
			factor, err = getf("rope.scale_linear", 0)
		}
		if err != nil || factor < 0 {
			return c, fmt.Errorf("%w: rope scaling factor %v", ErrHParams, factor)
		}
		if factor > 0 {
			c.RopeScale = 1 / factor
		}
	default:
		return c, fmt.Errorf("%w: rope.scaling.type %q (native engine: none or linear)", ErrHParams, st)
	}
	if c.NormEps <= 0 || c.RopeBase <= 0 {
		return c, fmt.Errorf("%w: rms eps %v, rope base %v", ErrHParams, c.NormEps, c.RopeBase)
	}
	te, ok := f.Tensor("token_embd.weight")
	if !ok || len(te.Dims) != 2 || te.Dims[1] <= 0 || te.Dims[1] > 1<<24 {
		return c, fmt.Errorf("%w: token_embd.weight missing or not 2-D", ErrTensor)
	}
	c.NVocab = int(te.Dims[1])
	_, c.RopeFreqs = f.Tensor("rope_freqs.weight")
	if err := c.readFamily(f, getf, geti); err != nil {
		return c, err
	}
	return c, nil
}

// tensorSpec is what the llama graph needs of one tensor.
type tensorSpec struct {
	name     string
	ne       []int64
	optional bool
	role     tensorRole
}

type tensorRole int

const (
	roleMatMul tensorRole = iota // weight of a mul_mat: any type the CPU can vec_dot
	roleNorm                     // F32 vector
	roleEmbd                     // get_rows source
)

// specs lists every tensor of a model of c's family with its expected
// shape (llama-model.cpp's create_tensor calls for the architecture).
func (c *Config) specs() []tensorSpec {
	E, V, F := int64(c.NEmbd), int64(c.NVocab), int64(c.NFF)
	Q, KV, HD := int64(c.NHead*c.HeadDim), int64(c.NEmbdKV()), int64(c.HeadDim)
	fam := c.Fam
	s := []tensorSpec{
		{name: "token_embd.weight", ne: []int64{E, V}, role: roleEmbd},
		{name: "output_norm.weight", ne: []int64{E}, role: roleNorm},
	}
	if !fam.AlwaysTied {
		s = append(s, tensorSpec{name: "output.weight", ne: []int64{E, V}, optional: true})
	}
	if c.Arch == "llama" {
		s = append(s, tensorSpec{name: "rope_freqs.weight", ne: []int64{HD / 2}, optional: true, role: roleNorm})
	}
	if fam.LongRoPE {
		s = append(s,
			tensorSpec{name: "rope_factors_long.weight", ne: []int64{HD / 2}, optional: true, role: roleNorm},
			tensorSpec{name: "rope_factors_short.weight", ne: []int64{HD / 2}, optional: true, role: roleNorm})
	}
	for i := 0; i < c.NLayer; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		s = append(s, tensorSpec{name: b + "attn_norm.weight", ne: []int64{E}, role: roleNorm})
		if fam.FusedQKV {
			s = append(s, tensorSpec{name: b + "attn_qkv.weight", ne: []int64{E, Q + 2*KV}})
		} else {
			s = append(s,
				tensorSpec{name: b + "attn_q.weight", ne: []int64{E, Q}},
				tensorSpec{name: b + "attn_k.weight", ne: []int64{E, KV}},
				tensorSpec{name: b + "attn_v.weight", ne: []int64{E, KV}})
		}
		if fam.QKVBias {
			s = append(s,
				tensorSpec{name: b + "attn_q.bias", ne: []int64{Q}, optional: true, role: roleNorm},
				tensorSpec{name: b + "attn_k.bias", ne: []int64{KV}, optional: true, role: roleNorm},
				tensorSpec{name: b + "attn_v.bias", ne: []int64{KV}, optional: true, role: roleNorm})
		}
		if fam.QKNorm {
			s = append(s,
				tensorSpec{name: b + "attn_q_norm.weight", ne: []int64{HD}, role: roleNorm},
				tensorSpec{name: b + "attn_k_norm.weight", ne: []int64{HD}, role: roleNorm})
		}
		s = append(s, tensorSpec{name: b + "attn_output.weight", ne: []int64{Q, E}})
		if fam.PostNorms {
			s = append(s, tensorSpec{name: b + "post_attention_norm.weight", ne: []int64{E}, role: roleNorm})
		}
		s = append(s, tensorSpec{name: b + "ffn_norm.weight", ne: []int64{E}, role: roleNorm})
		if fam.FusedGateUp {
			s = append(s, tensorSpec{name: b + "ffn_up.weight", ne: []int64{E, 2 * F}})
		} else {
			s = append(s,
				tensorSpec{name: b + "ffn_gate.weight", ne: []int64{E, F}},
				tensorSpec{name: b + "ffn_up.weight", ne: []int64{E, F}})
		}
		s = append(s, tensorSpec{name: b + "ffn_down.weight", ne: []int64{F, E}})
		if fam.PostNorms {
			s = append(s, tensorSpec{name: b + "post_ffw_norm.weight", ne: []int64{E}, role: roleNorm})
		}
	}
	return s
}

// extraTensor is the first tensor of f no spec names (""): a tensor the
// graph would not apply is refused by name, as llama.cpp refuses a file
// with tensors its architecture does not create.
func extraTensor(f *gguf.File, specs []tensorSpec) string {
	known := make(map[string]bool, len(specs))
	for i := range specs {
		known[specs[i].name] = true
	}
	for _, t := range f.Tensors {
		if !known[t.Name] {
			return t.Name
		}
	}
	return ""
}

// checkTensor validates one tensor's info against its spec and the file.
func checkTensor(f *gguf.File, sp *tensorSpec, t *gguf.TensorInfo) error {
	if len(t.Dims) != len(sp.ne) {
		return fmt.Errorf("%w: %s has shape %v, want %v", ErrTensor, sp.name, t.Dims, sp.ne)
	}
	for i := range sp.ne {
		if t.Dims[i] != sp.ne[i] {
			return fmt.Errorf("%w: %s has shape %v, want %v", ErrTensor, sp.name, t.Dims, sp.ne)
		}
	}
	typ := kernels.GGMLType(t.Type)
	if !typ.Valid() || !typ.RowOK(t.Dims[0]) {
		return fmt.Errorf("%w: %s has type %v (invalid for rows of %d)", ErrTensor, sp.name, t.Type, t.Dims[0])
	}
	switch sp.role {
	case roleNorm:
		if typ != kernels.GGMLTypeF32 {
			return fmt.Errorf("%w: %s is %s, want f32", ErrTensor, sp.name, typ)
		}
	case roleMatMul, roleEmbd:
		if !typ.CPUMatMulOK() {
			return fmt.Errorf("%w: %s has type %s, which the ggml CPU backend cannot multiply", ErrTensor, sp.name, typ)
		}
	}
	want := typ.RowSize(t.Dims[0])
	for _, d := range t.Dims[1:] {
		want *= d
	}
	off := f.AbsOffset(t)
	if t.Offset < 0 || off < f.DataOffset || off+want > f.FileSize {
		return fmt.Errorf("%w: %s data [%d, %d) is outside the file (%d bytes)", ErrTensor, sp.name, off, off+want, f.FileSize)
	}
	return nil
}
