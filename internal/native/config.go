package native

import (
	"errors"
	"fmt"
	"math"

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
}

// NEmbdKV is the width of one K (or V) row: n_head_kv * head_dim.
func (c *Config) NEmbdKV() int { return c.NHeadKV * c.HeadDim }

// readConfig extracts and validates the llama hyperparameters.
func readConfig(f *gguf.File) (Config, error) {
	c := Config{Arch: f.Arch()}
	if c.Arch != "llama" {
		return c, fmt.Errorf("%w %q (native engine: llama only)", ErrArch, c.Arch)
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
	if c.NEmbd%c.NHead != 0 || c.NHead%c.NHeadKV != 0 {
		return c, fmt.Errorf("%w: n_embd %d, heads %d, kv heads %d do not divide", ErrHParams, c.NEmbd, c.NHead, c.NHeadKV)
	}
	c.HeadDim = c.NEmbd / c.NHead
	if k, err := geti("attention.key_length", c.HeadDim, false); err != nil || k != c.HeadDim {
		return c, fmt.Errorf("%w: attention.key_length %d != n_embd/n_head %d", ErrHParams, k, c.HeadDim)
	}
	if v, err := geti("attention.value_length", c.HeadDim, false); err != nil || v != c.HeadDim {
		return c, fmt.Errorf("%w: attention.value_length %d != n_embd/n_head %d", ErrHParams, v, c.HeadDim)
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
	c.RopeScale = 1
	if st, err := f.GetString(p + "rope.scaling.type"); err == nil && st != "none" {
		if st != "linear" {
			return c, fmt.Errorf("%w: rope.scaling.type %q (native engine: none or linear)", ErrHParams, st)
		}
		factor, err := getf("rope.scaling.factor", 1)
		if err != nil || factor <= 0 {
			return c, fmt.Errorf("%w: rope.scaling.factor %v", ErrHParams, factor)
		}
		c.RopeScale = 1 / factor
	} else if factor, err := getf("rope.scale_linear", 1); err == nil && factor > 0 {
		c.RopeScale = 1 / factor
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

// specs lists every tensor of a llama model with its expected shape.
func (c *Config) specs() []tensorSpec {
	E, V, F := int64(c.NEmbd), int64(c.NVocab), int64(c.NFF)
	Q, KV := int64(c.NHead*c.HeadDim), int64(c.NEmbdKV())
	s := []tensorSpec{
		{name: "token_embd.weight", ne: []int64{E, V}, role: roleEmbd},
		{name: "output_norm.weight", ne: []int64{E}, role: roleNorm},
		{name: "output.weight", ne: []int64{E, V}, optional: true},
		{name: "rope_freqs.weight", ne: []int64{int64(c.HeadDim / 2)}, optional: true, role: roleNorm},
	}
	for i := 0; i < c.NLayer; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		s = append(s,
			tensorSpec{name: b + "attn_norm.weight", ne: []int64{E}, role: roleNorm},
			tensorSpec{name: b + "attn_q.weight", ne: []int64{E, Q}},
			tensorSpec{name: b + "attn_k.weight", ne: []int64{E, KV}},
			tensorSpec{name: b + "attn_v.weight", ne: []int64{E, KV}},
			tensorSpec{name: b + "attn_output.weight", ne: []int64{Q, E}},
			tensorSpec{name: b + "ffn_norm.weight", ne: []int64{E}, role: roleNorm},
			tensorSpec{name: b + "ffn_gate.weight", ne: []int64{E, F}},
			tensorSpec{name: b + "ffn_up.weight", ne: []int64{E, F}},
			tensorSpec{name: b + "ffn_down.weight", ne: []int64{F, E}},
		)
	}
	return s
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
