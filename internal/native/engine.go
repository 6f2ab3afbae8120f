package native

import (
	"fmt"
	"time"

	"github.com/edgellm/edgellm/internal/engine"
)

// Options configures Load.
type Options struct {
	// Threads is the default threadpool size of sessions (SessionConfig.Threads
	// overrides it); 0 = all cores.
	Threads int
	// CPUs pins session threadpools to these CPU ids (e.g. the big cores);
	// empty = default affinity.
	CPUs []int
	// StrictCPU places thread i on CPUs[i].
	StrictCPU bool
	// Poll is the threadpool's busy-wait level between graphs (0-100).
	Poll int
	// WillNeedLayers is how many leading layers get MADV_WILLNEED at load
	// (-1 = all). The zero value means 2.
	WillNeedLayers int
	// Advice is the access advice for the weight mapping ("" = normal).
	Advice Advice
	// KVPad rounds the attended KV length up to a multiple of it (0 = 256,
	// llama.cpp's padding: bit-identical logits). Smaller values attend over
	// less padding (faster for tiny models) but change the summation order.
	KVPad int
	// NoVocab skips loading llama.cpp's tokenizer (Vocab returns nil);
	// for callers that bring token ids.
	NoVocab bool
}

// LoadReport describes what Load did.
type LoadReport struct {
	Duration        time.Duration
	FileBytes       int64
	DataPageAligned bool // the GGUF data section starts on a page boundary
	TiedOutput      bool
}

// Engine is the native llama engine over one mmap'd GGUF file. It is safe
// for use by one goroutine at a time; close its Sessions before it.
type Engine struct {
	w      *Weights
	vocab  *vocab
	opts   Options
	report LoadReport
	closed bool
}

var _ engine.Engine = (*Engine)(nil)

// Load maps the model at path and validates it for the llama graph.
func Load(path string, opts Options) (*Engine, error) {
	start := time.Now()
	if opts.WillNeedLayers == 0 {
		opts.WillNeedLayers = 2
	}
	if opts.KVPad == 0 {
		opts.KVPad = defaultKVPad
	}
	if opts.KVPad < 1 || opts.KVPad > 1<<16 {
		return nil, fmt.Errorf("native: KV padding %d", opts.KVPad)
	}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("native: threads %d", opts.Threads)
	}
	w, err := OpenWeights(path, WeightsOptions{WillNeedLayers: opts.WillNeedLayers, Advice: opts.Advice})
	if err != nil {
		return nil, err
	}
	e := &Engine{w: w, opts: opts}
	if !opts.NoVocab {
		if e.vocab, err = loadVocab(path); err != nil {
			w.Close()
			return nil, err
		}
	}
	e.report = LoadReport{Duration: time.Since(start), FileBytes: w.Size(),
		DataPageAligned: w.DataPageAligned, TiedOutput: w.Tied}
	return e, nil
}

// Name is "native".
func (e *Engine) Name() string { return "native" }

// Config is the model blueprint.
func (e *Engine) Config() Config { return e.w.Config }

// Report describes the load.
func (e *Engine) Report() LoadReport { return e.report }

// Weights returns the mapped weights.
func (e *Engine) Weights() *Weights { return e.w }

// Info describes the model.
func (e *Engine) Info() engine.ModelInfo {
	c := &e.w.Config
	name, _ := e.w.File.GetString("general.name")
	ft := "unknown"
	if e.w.Layers[0].Wq.Type().Valid() {
		ft = e.w.Layers[0].Wq.Type().String()
	}
	return engine.ModelInfo{Path: e.w.Path, Arch: c.Arch, Name: name, NVocab: c.NVocab, NCtxTrain: c.NCtxTrain,
		NEmbd: c.NEmbd, NLayer: c.NLayer, NHead: c.NHead, NHeadKV: c.NHeadKV, NFF: c.NFF,
		FileBytes: e.w.Size(), ParamCount: e.w.File.ParamCount(), FileType: ft,
		Description: fmt.Sprintf("llama %d layers, n_embd %d, %s (native)", c.NLayer, c.NEmbd, ft)}
}

// Vocab is llama.cpp's tokenizer for the model (nil with Options.NoVocab).
func (e *Engine) Vocab() engine.Vocab {
	if e.vocab == nil {
		return nil
	}
	return e.vocab
}

// Capabilities of the native engine as built so far.
func (e *Engine) Capabilities() engine.Capabilities {
	return engine.Capabilities{SlidingWindow: true, KVTypes: []engine.KVType{engine.KVF16, engine.KVF32, engine.KVQ8_0, engine.KVQ4_0}}
}

// Close unmaps the weights. Sessions must be closed first.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	if e.vocab != nil {
		e.vocab.Close()
	}
	return e.w.Close()
}
