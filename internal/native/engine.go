package native

import (
	"fmt"
	"time"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/kernels"
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
	// WillNeedLayers is how many leading layers (and the output head) get
	// MADV_WILLNEED at load: WillNeedAll, WillNeedNone or a count. The zero
	// value means 2.
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
	// ExtraSets are GGUF files of the same model at other precisions (weight
	// sets 1, 2, ...; the file passed to Load is set 0). All are validated
	// against set 0 before anything is mapped, then mapped; sessions choose
	// per layer which set to use (Session.SetLayerSets).
	ExtraSets []string
	// ColdAdvice is what Engine.AdviseUnused does to unused sets' pages
	// ("" = dontneed).
	ColdAdvice ColdAdvice
	// Tiers makes the weight sets a tier ladder (tiers.go): set i is tier i,
	// sessions start with every layer and the head on StartTier and move
	// all of them at once with Session.SwapTier; per-layer precision
	// (Capabilities.PerLayerPrec) is off.
	Tiers     bool
	StartTier int
	// SynthAgree (0 = off) makes every draft a SIMULATED one for speculation
	// benchmarks (synthmix.go): at a hashed ≈ 1 − SynthAgree share of
	// positions the draft's proposal is replaced by another token, so on a
	// target its draft always matches (synth.ZeroFrom) the acceptance is
	// ≈ SynthAgree while the output stays the target's. The draft's and
	// the target's costs are real. Label results SYNTHETIC.
	SynthAgree float32
	// Repack copies every weight set's eligible matrices into ggml's
	// CPU_REPACK buffer (WeightsOptions.Repack): faster kernels, paid for
	// in anonymous memory per set (LoadReport.Repack). All sets, because a
	// session may select any of them for any layer; load fewer sets to pay
	// less. With Kernels "edgellm" on a CPU that runs the q4x4 kernel, the
	// plain Q4_0 matrices are repacked into edgellm's q4x4 layout instead
	// (ownlayout.go; LoadReport.OwnLayout), and ggml's buffer holds only
	// the other types it interleaves.
	Repack bool
	// RepackLayers is, with Repack, how many units are repacked at load:
	// layers from 0 up, then the output head (Engine.SetRepackLayers
	// changes it later); 0 = all, RepackNone = none (the buffer is
	// reserved, untouched, for a later SetRepackLayers). A unit is its
	// matrices in ggml's buffer and in the q4x4 layout together.
	RepackLayers int
	// Kernels chooses the kernels of the weight matmuls in batches of up
	// to kernels.EdgellmMaxN tokens (decode steps, speculative verify):
	// "" or KernelsGGML is ggml's mul_mat; KernelsEdgellm is edgellm's own
	// (kernels.MulMatEdgellm) for plain Q8_0, Q4_0, F32 and F16 matrices,
	// batch-invariant (Session.BatchInvariance). On a CPU that runs the
	// q4x4 kernel (kernels.EdgellmQ4x4Available), q4x4 is the repacked
	// layout of the plain Q4_0 matrices, per repack unit (ownlayout.go):
	// a unit holding its copies runs edgellm's q4x4 kernel at every batch
	// size, prefill included; a released unit reads the mapped blocks with
	// the plain kernels (the same bits up to kernels.EdgellmMaxN rows).
	// Without Repack every unit of every set is in q4x4 at load, and
	// SetRepackLayers and the advise step release and refill units as they
	// do ggml's repacked ones. Other types, larger batches (prefill) of the
	// others and matrices in ggml's interleaved layout keep ggml's kernels.
	Kernels string
	// ShareAnchors advises every session's anchor zones MADV_MERGEABLE
	// whatever the number of open sessions, so the kernel's samepage
	// merging (KSM) can merge them with identical anchors in other
	// processes (one `serve` per process). Off: they are advised only
	// while two or more sessions of this engine are open (anchors.go).
	ShareAnchors bool
}

// Options.Kernels values.
const (
	KernelsGGML    = "ggml"
	KernelsEdgellm = "edgellm"
)

// RepackNone as Options.RepackLayers repacks nothing at load.
const RepackNone = engine.RepackNone

// LoadReport describes what Load did.
type LoadReport struct {
	Duration        time.Duration
	FileBytes       int64
	DataPageAligned bool // the GGUF data section starts on a page boundary
	TiedOutput      bool
	// Repack is per weight set what Options.Repack cost; nil without it.
	Repack []RepackStats
	// OwnLayout is what edgellm's own Q4_0 layout costs with every unit in
	// it (all sets; zero unless Kernels is "edgellm" on a CPU that runs the
	// q4x4 kernel). RepackBytes and the repack counts include it:
	// anonymous memory too; RepackState has what units hold now.
	OwnLayout OwnLayoutStats
}

// repackTensors is how many matrices all weight sets repacked.
func (r LoadReport) repackTensors() int {
	n := r.OwnLayout.Tensors
	for _, s := range r.Repack {
		n += s.Tensors
	}
	return n
}

// RepackBytes is the anonymous memory all weight sets' repacked matrices
// occupy (their buffers, padding included).
func (r LoadReport) RepackBytes() int64 {
	n := r.OwnLayout.Bytes
	for _, s := range r.Repack {
		n += s.BufferBytes
	}
	return n
}

// RepackHugePageBytes is the part of RepackBytes advised for transparent
// huge pages.
func (r LoadReport) RepackHugePageBytes() int64 {
	n := r.OwnLayout.HugePageBytes
	for _, s := range r.Repack {
		n += s.HugePageBytes
	}
	return n
}

// Engine is the native llama engine over one mmap'd GGUF file (or several:
// the same model at other precisions, Options.ExtraSets). It is safe
// for use by one goroutine at a time; close its Sessions before it.
type Engine struct {
	w      *Weights   // = sets[0]
	sets   []*Weights // weight sets: the same model at several precisions
	use    []setUse   // per set: sessions using each layer and the head
	vocab  *vocab
	opts   Options
	report LoadReport
	closed bool
	tier   tierState // Options.Tiers (tiers.go)

	// own are edgellm's q4x4 copies (ownlayout.go); nil when none.
	own *ownLayouts

	// repackGen counts SetRepackLayers calls that changed a tensor; it is
	// in every graph key, so graphs on released tensors are rebuilt.
	repackGen uint64
	// open are the open sessions: their KV anchor zones are mergeable
	// while there are two or more (anchors.go).
	open openSessions
}

var _ engine.Engine = (*Engine)(nil)

// Options.WillNeedLayers values besides a count.
const (
	WillNeedAll  = engine.WillNeedAll  // every layer
	WillNeedNone = engine.WillNeedNone // nothing: every page faults in on first use
)

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
	if _, err := opts.ColdAdvice.flag(); err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	if err := checkTiers(opts); err != nil {
		return nil, err
	}
	if opts.Repack && !kernels.RepackAvailable() {
		return nil, fmt.Errorf("native: %w", kernels.ErrNoRepack)
	}
	switch opts.Kernels {
	case "", KernelsGGML, KernelsEdgellm:
	default:
		return nil, fmt.Errorf("native: kernels %q (want %q or %q)", opts.Kernels, KernelsGGML, KernelsEdgellm)
	}
	// Every header is parsed and checked before anything is mapped.
	headers := make([]*weightsHeader, 0, 1+len(opts.ExtraSets))
	for i, p := range append([]string{path}, opts.ExtraSets...) {
		h, err := parseWeights(p)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			if err := sameModel(headers[0], h); err != nil {
				return nil, fmt.Errorf("native: weight set %d: %w", i, err)
			}
		}
		headers = append(headers, h)
	}
	e := &Engine{opts: opts}
	e.open.always = opts.ShareAnchors
	if opts.Kernels == KernelsEdgellm && kernels.EdgellmQ4x4Available() {
		e.own = newOwnLayouts() // q4x4 is the Q4_0 matrices' repacked layout
	}
	ok := false
	defer func() {
		if !ok {
			for _, w := range e.sets {
				w.Close()
			}
		}
	}()
	for i, h := range headers {
		wo := WeightsOptions{WillNeedLayers: opts.WillNeedLayers, Advice: opts.Advice, Repack: opts.Repack, RepackLayers: opts.RepackLayers, own: e.own}
		if !opts.Repack {
			wo.RepackLayers = 0 // the q4x4 layout alone: every unit at load
		}
		// The other sets start unused: with an advise step (ColdAdvice not
		// off) their repacked copies are not written at load but wait cold
		// until a session uses a layer of them (AdviseUnused repacks it).
		// (Without Repack, the q4x4 copies of every set are made at load.)
		coldSet := i != startSet(opts) && opts.Repack && opts.ColdAdvice != ColdOff
		if i != startSet(opts) {
			wo.WillNeedLayers = 0 // the other sets fault in when selected
		}
		if coldSet {
			wo.RepackLayers = RepackNone
		}
		w, err := h.open(wo)
		if err != nil {
			return nil, err
		}
		u := newSetUse(w.Config.NLayer)
		if coldSet && len(w.units) > 0 {
			w.startCold(opts.RepackLayers)
			for il := range u.layerCold {
				u.layerCold[il] = true
			}
			u.headCold = true
		}
		e.sets = append(e.sets, w)
		e.use = append(e.use, u)
	}
	e.w = e.sets[0]
	e.tier = tierState{on: opts.Tiers, cur: startSet(opts)}
	w := e.w
	if !opts.NoVocab {
		var err error
		if e.vocab, err = loadVocab(path); err != nil {
			return nil, err
		}
	}
	if e.own != nil && e.own.stats.Tensors == 0 {
		e.own = nil // nothing in the q4x4 layout
	}
	ok = true
	e.report = LoadReport{Duration: time.Since(start), FileBytes: w.Size(),
		DataPageAligned: w.DataPageAligned, TiedOutput: w.Tied}
	if e.own != nil {
		e.report.OwnLayout = e.own.stats
	}
	if opts.Repack {
		for _, s := range e.sets {
			e.report.Repack = append(e.report.Repack, s.Repack)
		}
	}
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
	tmpl, _ := e.w.File.GetString("tokenizer.chat_template")
	rs := e.RepackState()
	ft := "unknown"
	if e.w.Layers[0].Wo.Type().Valid() {
		ft = e.w.Layers[0].Wo.Type().String()
	}
	return engine.ModelInfo{Path: e.w.Path, Arch: c.Arch, Name: name, NVocab: c.NVocab, NCtxTrain: c.NCtxTrain,
		NEmbd: c.NEmbd, NLayer: c.NLayer, NHead: c.NHead, NHeadKV: c.NHeadKV, NFF: c.NFF,
		FileBytes: e.w.Size(), ParamCount: e.w.File.ParamCount(), FileType: ft,
		Description: fmt.Sprintf("%s %d layers, n_embd %d, %s (native)", c.Arch, c.NLayer, c.NEmbd, ft), ChatTemplate: tmpl,
		RepackBytes: e.report.RepackBytes(), RepackTensors: e.report.repackTensors(),
		RepackHugePageBytes: e.report.RepackHugePageBytes(),
		RepackLayers:        rs.Layers, RepackLayersMax: rs.MaxLayers, RepackInUseBytes: rs.Bytes}
}

// Vocab is llama.cpp's tokenizer for the model (nil with Options.NoVocab).
func (e *Engine) Vocab() engine.Vocab {
	if e.vocab == nil {
		return nil
	}
	return e.vocab
}

// Capabilities of the native engine: speculative decoding. What its
// sessions can change is what they implement (public.go).
func (e *Engine) Capabilities() engine.Capabilities {
	return engine.Capabilities{Speculative: true, MaxSpeculativeK: MaxSpecK}
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
	var err error // the sets free their q4x4 copies (Weights.Close)
	for _, w := range e.sets {
		if cerr := w.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}
