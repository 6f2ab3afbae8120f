package synth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/shareddir"
	"github.com/edgellm/edgellm/kernels"
)

// ChunkElems is the most float32 elements one worker generates and quantizes
// at a time (16 MiB of float32 plus its quantized copy).
const ChunkElems = 4 << 20

// DefaultVocab is the vocabulary GGUF used when Options.VocabPath is empty,
// relative to the shared directory.
const DefaultVocab = "models/vocab/ggml-vocab-llama-spm.gguf"

// Options configures Write.
type Options struct {
	Shape     Shape
	Type      gguf.Type // type of the 2-D weights; norms (and rope_freqs) stay F32
	VocabPath string    // GGUF whose tokenizer.* KVs are copied; "" = DefaultVocabPath()
	Seed      uint64
	Out       string // output path
	Workers   int    // parallel generate+quantize workers; 0 = 2
}

// Progress is reported after every batch of chunks.
type Progress struct {
	Tensor, NTensors int    // tensors finished / total
	Name             string // tensor in progress
	Written, Total   int64  // tensor data bytes
	Elapsed          time.Duration
}

// FileType maps a weight type to llama.cpp's general.file_type (llama_ftype)
// for a file whose 2-D weights all have that type.
func FileType(t gguf.Type) (uint32, bool) {
	ft, ok := map[gguf.Type]uint32{
		gguf.F32: 0, gguf.F16: 1, gguf.Q4_0: 2, gguf.Q4_1: 3, gguf.Q8_0: 7, gguf.Q5_0: 8, gguf.Q5_1: 9,
		gguf.Q2_K: 10, gguf.Q3_K: 11, gguf.Q4_K: 14, gguf.Q5_K: 16, gguf.Q6_K: 18, gguf.BF16: 32,
	}[t]
	return ft, ok
}

// DefaultVocabPath finds DefaultVocab in the shared directory
// (internal/shareddir's one rule: $EDGELLM_SHARED, else a "shared"
// directory beside the working directory, the binary or a parent).
func DefaultVocabPath() (string, error) {
	if d := shareddir.Dir(); d != "" {
		if p := filepath.Join(d, DefaultVocab); fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("default vocabulary %s not found: set EDGELLM_SHARED or pass a vocabulary path", DefaultVocab)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// init describes how a tensor's values are made.
type tensorSpec struct {
	name   string
	dims   []int64 // ne[0] first
	typ    gguf.Type
	std    float64   // uniform random with this standard deviation, if values == nil
	values []float32 // fixed values (norms, rope factors)
}

// plan lists the tensors of a llama model of shape s, in file order, with the
// names and shapes llama.cpp's llama loader expects (llama-model.cpp,
// LLM_ARCH_LLAMA).
//
// Scales keep activations finite through every layer: inputs to every
// projection are RMS-normalised, so a projection with std 1/sqrt(fan_in)
// gives outputs of RMS ≈ 1; the two projections that write into the residual
// stream (attn_output, ffn_down) are further scaled by 1/sqrt(2·n_layer)
// (GPT-2's residual scaling), so the residual stays O(1) after any number of
// layers. Embeddings have std 1/sqrt(n_embd) so that, tied or not, logits have
// RMS ≈ 1 (output.weight a little smaller: 0.5/sqrt(n_embd)).
func plan(s Shape, t gguf.Type, nVocab int) []tensorSpec {
	e, ff, v := int64(s.NEmbd), int64(s.NFF), int64(nVocab)
	kv := int64(s.HeadDim() * s.NHeadKV)
	ones := func(n int64) []float32 {
		o := make([]float32, n)
		for i := range o {
			o[i] = 1
		}
		return o
	}
	norm := ones(e)
	resid := 1 / math.Sqrt(2*float64(s.NLayer))
	specs := []tensorSpec{{name: "token_embd.weight", dims: []int64{e, v}, typ: t, std: 1 / math.Sqrt(float64(e))}}
	if s.Llama3Rope {
		specs = append(specs, tensorSpec{name: "rope_freqs.weight", dims: []int64{int64(s.HeadDim() / 2)}, typ: gguf.F32,
			values: llama3RopeFactors(s.HeadDim(), s.RopeBase)})
	}
	for i := 0; i < s.NLayer; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		specs = append(specs,
			tensorSpec{name: p + "attn_norm.weight", dims: []int64{e}, typ: gguf.F32, values: norm},
			tensorSpec{name: p + "attn_q.weight", dims: []int64{e, e}, typ: t, std: 1 / math.Sqrt(float64(e))},
			tensorSpec{name: p + "attn_k.weight", dims: []int64{e, kv}, typ: t, std: 1 / math.Sqrt(float64(e))},
			tensorSpec{name: p + "attn_v.weight", dims: []int64{e, kv}, typ: t, std: 1 / math.Sqrt(float64(e))},
			tensorSpec{name: p + "attn_output.weight", dims: []int64{e, e}, typ: t, std: resid / math.Sqrt(float64(e))},
			tensorSpec{name: p + "ffn_norm.weight", dims: []int64{e}, typ: gguf.F32, values: norm},
			tensorSpec{name: p + "ffn_gate.weight", dims: []int64{e, ff}, typ: t, std: 1 / math.Sqrt(float64(e))},
			tensorSpec{name: p + "ffn_up.weight", dims: []int64{e, ff}, typ: t, std: 1 / math.Sqrt(float64(e))},
			tensorSpec{name: p + "ffn_down.weight", dims: []int64{ff, e}, typ: t, std: resid / math.Sqrt(float64(ff))},
		)
	}
	specs = append(specs, tensorSpec{name: "output_norm.weight", dims: []int64{e}, typ: gguf.F32, values: norm})
	if !s.TiedEmbeddings {
		specs = append(specs, tensorSpec{name: "output.weight", dims: []int64{e, v}, typ: t, std: 0.5 / math.Sqrt(float64(e))})
	}
	return specs
}

// Validate checks opts without writing anything.
func (o Options) Validate() error {
	if err := o.Shape.Validate(); err != nil {
		return err
	}
	if _, ok := FileType(o.Type); !ok || !kernels.Quantizable(uint32(o.Type)) {
		return fmt.Errorf("type %s is not supported (want F32, F16, BF16, Q8_0, Q5_0, Q5_1, Q4_0, Q4_1, Q2_K..Q6_K)", o.Type)
	}
	for _, n := range []int{o.Shape.NEmbd, o.Shape.NFF, o.Shape.NHead * o.Shape.HeadDim()} {
		if n%o.Type.BlockSize() != 0 {
			return fmt.Errorf("shape %s: row length %d is not a multiple of %s's block size %d", o.Shape.Name, n, o.Type, o.Type.BlockSize())
		}
	}
	if o.Out == "" {
		return errors.New("no output path")
	}
	return nil
}

// Write synthesizes the model described by opts into opts.Out. progress (may
// be nil) is called from Write's goroutine.
func Write(ctx context.Context, opts Options, progress func(Progress)) (err error) {
	if err := opts.Validate(); err != nil {
		return err
	}
	if opts.VocabPath == "" {
		if opts.VocabPath, err = DefaultVocabPath(); err != nil {
			return err
		}
		if opts.Shape.Vocab != "" {
			opts.VocabPath = filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(opts.VocabPath))), opts.Shape.Vocab)
		}
	}
	vocabKVs, nTokens, err := tokenizerKVs(opts.VocabPath)
	if err != nil {
		return err
	}
	if opts.Shape.Chat != "" {
		if vocabKVs, nTokens, err = addChat(vocabKVs, ChatFamilies[opts.Shape.Chat]); err != nil {
			return fmt.Errorf("chat format %s: %w", opts.Shape.Chat, err)
		}
	}

	tmp := opts.Out + ".tmp"
	w, err := gguf.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(tmp)
		} else if err = os.Rename(tmp, opts.Out); err != nil {
			os.Remove(tmp)
		}
	}()

	// Metadata: general.*, llama.* hyper-parameters, then the tokenizer.
	s := opts.Shape
	ft, _ := FileType(opts.Type)
	kvs := []gguf.KV{
		{Key: gguf.KeyArchitecture, Value: gguf.String(s.ArchName())},
		{Key: gguf.KeyName, Value: gguf.String("edgellm-synth-" + s.Name)},
		{Key: "general.description", Value: gguf.String(fmt.Sprintf(
			"SYNTHETIC: random weights in the shape of %s (edgellm synth, seed %d); not a trained model", s.Name, opts.Seed))},
		{Key: gguf.KeyFileType, Value: gguf.Uint32(ft)},
		{Key: "general.quantization_version", Value: gguf.Uint32(2)},
	}
	kvs = append(kvs, archKVs(s, nTokens)...)
	kvs = append(kvs, vocabKVs...)
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	specs := plan(s, opts.Type, nTokens)
	if s.ArchName() != "llama" {
		specs = planFamily(s, opts.Type, nTokens)
	}
	for _, sp := range specs {
		if err := w.AddTensor(sp.name, sp.dims, sp.typ); err != nil {
			return err
		}
	}
	var total int64
	for _, t := range w.Tensors() {
		total += t.Size
	}
	if err := w.WriteHeader(); err != nil {
		return err
	}

	// Data, tensor by tensor, chunk by chunk.
	g := newGenerator(opts.Workers)
	start := time.Now()
	var written int64
	for i, sp := range specs {
		report := func() {
			if progress != nil {
				progress(Progress{Tensor: i, NTensors: len(specs), Name: sp.name, Written: written, Total: total, Elapsed: time.Since(start)})
			}
		}
		if sp.values != nil {
			n, err := g.writeValues(w, sp)
			written += n
			if err != nil {
				return err
			}
			continue
		}
		err := g.writeRandom(ctx, w, sp, opts.Seed, uint64(i), func(n int64) { written += n; report() })
		if err != nil {
			return err
		}
	}
	if progress != nil {
		progress(Progress{Tensor: len(specs), NTensors: len(specs), Written: written, Total: total, Elapsed: time.Since(start)})
	}
	return nil
}

// generator owns the per-worker chunk buffers, reused for every chunk.
type generator struct {
	src [][]float32
	dst [][]byte
}

func newGenerator(workers int) *generator {
	if workers <= 0 {
		workers = 2
	}
	return &generator{src: make([][]float32, workers), dst: make([][]byte, workers)}
}

func (g *generator) writeValues(w *gguf.Writer, sp tensorSpec) (int64, error) {
	rows := int(len(sp.values) / int(sp.dims[0]))
	rs := int(sp.typ.RowSize(sp.dims[0]))
	buf := make([]byte, rows*rs)
	if _, err := kernels.QuantizeRows(uint32(sp.typ), sp.values, buf, rows, int(sp.dims[0])); err != nil {
		return 0, fmt.Errorf("%s: %w", sp.name, err)
	}
	n, err := w.Write(buf)
	return int64(n), err
}

// writeRandom streams tensor sp: batches of up to len(g.src) chunks are
// generated and quantized in parallel, then written in order.
func (g *generator) writeRandom(ctx context.Context, w *gguf.Writer, sp tensorSpec, seed, tensorIdx uint64, done func(int64)) error {
	perRow := int(sp.dims[0])
	var nrows int64 = 1
	for _, d := range sp.dims[1:] {
		nrows *= d
	}
	rowsPerChunk := int64(max(1, ChunkElems/perRow))
	rs := int(sp.typ.RowSize(int64(perRow)))
	nChunks := (nrows + rowsPerChunk - 1) / rowsPerChunk
	// Uniform on [-a, a] has standard deviation a/sqrt(3).
	a := float32(sp.std * math.Sqrt(3))
	errs := make([]error, len(g.src))
	lens := make([]int, len(g.src))
	for c0 := int64(0); c0 < nChunks; c0 += int64(len(g.src)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		var wg sync.WaitGroup
		k := int(min(int64(len(g.src)), nChunks-c0))
		for j := 0; j < k; j++ {
			ci := c0 + int64(j)
			rows := int(min(rowsPerChunk, nrows-ci*rowsPerChunk))
			if cap(g.src[j]) < rows*perRow {
				g.src[j] = make([]float32, rows*perRow)
			}
			if cap(g.dst[j]) < rows*rs {
				g.dst[j] = make([]byte, rows*rs)
			}
			wg.Add(1)
			go func(j, rows int, ci int64) {
				defer wg.Done()
				src := g.src[j][:rows*perRow]
				fillUniform(src, a, seed, tensorIdx<<32|uint64(ci))
				lens[j], errs[j] = kernels.QuantizeRows(uint32(sp.typ), src, g.dst[j], rows, perRow)
			}(j, rows, ci)
		}
		wg.Wait()
		for j := 0; j < k; j++ {
			if errs[j] != nil {
				return fmt.Errorf("%s: %w", sp.name, errs[j])
			}
			if _, err := w.Write(g.dst[j][:lens[j]]); err != nil {
				return err
			}
			done(int64(lens[j]))
		}
	}
	return nil
}

// fillUniform fills dst with uniform values on [-a, a) from a PCG stream
// keyed by (seed, stream): two 24-bit values per 64-bit draw.
func fillUniform(dst []float32, a float32, seed, stream uint64) {
	rng := rand.NewPCG(seed, stream)
	const inv = 1.0 / (1 << 23) // 24-bit value / 2^23 in [0, 2)
	i := 0
	for ; i+1 < len(dst); i += 2 {
		u := rng.Uint64()
		dst[i] = (float32(u>>40)*inv - 1) * a
		dst[i+1] = (float32((u>>8)&0xffffff)*inv - 1) * a
	}
	if i < len(dst) {
		dst[i] = (float32(rng.Uint64()>>40)*inv - 1) * a
	}
}

// BuiltinByteVocab, as Options.VocabPath, selects a minimal built-in
// SentencePiece vocabulary: <unk>, <s>, </s> and the 256 byte tokens, so
// every text tokenizes by byte fallback. It needs no file: it is the
// tokenizer of last resort (the default model when ../shared is missing).
const BuiltinByteVocab = "builtin:bytes"

// tokenizerKVs returns the tokenizer.* metadata to copy and the token count.
func tokenizerKVs(path string) ([]gguf.KV, int, error) {
	if path == BuiltinByteVocab {
		tokens := []string{"<unk>", "<s>", "</s>"}
		types := []int32{2, 3, 3} // unknown, control, control
		for b := 0; b < 256; b++ {
			tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
			types = append(types, 6) // byte
		}
		scores := make([]float32, len(tokens))
		return []gguf.KV{
			{Key: "tokenizer.ggml.model", Value: gguf.String("llama")},
			{Key: "tokenizer.ggml.tokens", Value: gguf.Strings(tokens)},
			{Key: "tokenizer.ggml.scores", Value: gguf.Float32s(scores)},
			{Key: "tokenizer.ggml.token_type", Value: gguf.Int32s(types)},
			{Key: "tokenizer.ggml.unknown_token_id", Value: gguf.Uint32(0)},
			{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32(1)},
			{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32(2)},
		}, len(tokens), nil
	}
	vocab, err := gguf.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("vocabulary: %w", err)
	}
	tokens, err := vocab.GetStringArray("tokenizer.ggml.tokens")
	if err != nil {
		return nil, 0, fmt.Errorf("vocabulary %s: %w", path, err)
	}
	var kvs []gguf.KV
	for _, kv := range vocab.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			kvs = append(kvs, kv)
		}
	}
	return kvs, len(tokens), nil
}
