package host

import (
	"fmt"
	"io"
	"strings"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/llamacpp"
	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/kernels"
)

// LoadOptions configures Load.
type LoadOptions struct {
	// Engine is "auto" (native for the architectures it runs, native.FamilyNames, else llamacpp),
	// "native" or "llamacpp". "" means auto.
	Engine string
	// Tiers, when set, is a tier ladder (GGUF files of one base model, high to
	// low precision); the model path is ignored and tier StartTier is loaded.
	// The native engine maps every tier as a weight set and swaps by
	// pointer (native.Options.Tiers); the llamacpp engine reloads the model
	// and restores the KV state.
	Tiers     []string
	StartTier int
	// LayerSets are GGUF files of the same model at other precisions: the
	// native engine maps them beside the model and switches precision per
	// layer (policy LayerBits).
	LayerSets []string
	// NoMmap reads weights into memory instead of mapping the file.
	NoMmap bool
	// Repack copies the weights ggml has faster interleaved kernels for
	// (Q4_0, IQ4_NL, Q4_K on AVX2/NEON) into repacked layouts, on both
	// engines: faster matrix products, paid for in anonymous memory that the
	// kernel cannot reclaim under pressure (the native engine reports it per
	// weight set in its load report). Off: weights stay in the mmap'd,
	// reclaimable page cache. An error in a build without repacking. With
	// Kernels "edgellm" on the native engine, where edgellm's q4x4 kernel
	// runs, the Q4_0 matrices are repacked into its q4x4 layout instead.
	Repack bool
	// RepackLayers is, with Repack on the native engine, how many units are
	// repacked at load: layers from 0 up, then the output head; 0 = all,
	// RepackNone = none. The others read the mapped file until a policy
	// (Decision.RepackLayers) or RepackSetter repacks them; their share of
	// the buffer is reserved but never touched before. llama.cpp repacks
	// all or nothing: any other value is an error there.
	RepackLayers int
	// WillNeedLayers is, on the native engine, how many leading layers (and
	// the output head) are read ahead at load (MADV_WILLNEED), so the first
	// token does not wait on their page faults: 0 = the default (2),
	// WillNeedAll, WillNeedNone. docs/BENCHMARKS.md "Warm start" has the
	// time to first token and peak RSS from a cold page cache per value.
	WillNeedLayers int
	// Kernels is, on the native engine, which kernels compute the weight
	// matmuls: "" or "ggml" (ggml's), "edgellm" (edgellm's own
	// Q8_0/Q4_0/F32/F16 kernels for decode steps and verify batches up to 9
	// tokens (K+1), batch-invariant, so greedy speculation is exact: Draft.
	// BatchInvariance; on AVX-512 VNNI or AVX2 CPUs each Q4_0 matrix is
	// copied at load into edgellm's q4x4 layout, which serves every batch
	// size, prefill included, in anonymous memory: the Q4_0 matrices'
	// repacked layout, per repack unit (RepackLayers, RepackSetter and a
	// policy's Decision.RepackLayers release a unit onto the mapped plain
	// blocks, the same bits for decode steps, and restore it), reported
	// like repack's; without Repack every unit is copied at load; with
	// Repack ggml's buffer keeps only the other types it repacks, which
	// with other types keep ggml's kernels). The llamacpp engine has only
	// ggml's: "edgellm" there is an error.
	Kernels string
	// ShareAnchors, on the native engine, advises every session's KV
	// anchor zones (the pages of the first anchors positions: system
	// prompt, BOS) MADV_MERGEABLE even when the session is the engine's
	// only one, so the kernel's samepage merging (KSM, when switched on)
	// can keep one copy of identical anchors across processes: one
	// `serve` per process. Off, they are advised only while two or more
	// sessions of the engine are open. The llamacpp engine has no anchor
	// zones: an error there.
	ShareAnchors bool
	// Notices receives one-line notices (engine fallback); nil discards them.
	Notices io.Writer
}

// nativeLoader is set by the native engine when it is linked in.
var nativeLoader func(path string, opts LoadOptions) (Engine, error)

// Load loads a model (or a tier ladder) on the chosen engine.
func Load(path string, opts LoadOptions) (Engine, error) {
	notices := opts.Notices
	if notices == nil {
		notices = io.Discard
	}
	kind := opts.Engine
	if kind == "" {
		kind = "auto"
	}
	switch kind {
	case "auto", "native", "llamacpp":
	default:
		return nil, fmt.Errorf("unknown engine %q (want auto, native or llamacpp)", kind)
	}
	if opts.Repack && !kernels.RepackAvailable() {
		return nil, fmt.Errorf("LoadOptions.Repack: %w", kernels.ErrNoRepack)
	}
	if opts.RepackLayers != 0 && !opts.Repack {
		return nil, fmt.Errorf("LoadOptions.RepackLayers %d without LoadOptions.Repack", opts.RepackLayers)
	}
	if opts.RepackLayers < RepackNone {
		return nil, fmt.Errorf("LoadOptions.RepackLayers %d: want ≥ 0 (0 = all) or RepackNone", opts.RepackLayers)
	}
	switch opts.Kernels {
	case "", "ggml":
	case "edgellm":
		if kind == "llamacpp" {
			return nil, fmt.Errorf("LoadOptions.Kernels %q: the llamacpp engine runs ggml's kernels only", opts.Kernels)
		}
	default:
		return nil, fmt.Errorf("LoadOptions.Kernels %q (want ggml or edgellm)", opts.Kernels)
	}
	first := path
	if len(opts.Tiers) > 0 {
		if opts.StartTier < 0 || opts.StartTier >= len(opts.Tiers) {
			return nil, fmt.Errorf("start tier %d: the ladder has tiers 0..%d", opts.StartTier, len(opts.Tiers)-1)
		}
		first = opts.Tiers[opts.StartTier]
	}
	// Read the header ourselves first: a clear error for missing, truncated or
	// non-GGUF files before anything reaches C.
	f, err := gguf.Open(first)
	if err != nil {
		return nil, err
	}
	if len(f.Tensors) == 0 {
		return nil, fmt.Errorf("%s: a vocabulary-only file (no tensors), not a model", first)
	}
	if len(opts.Tiers) > 0 {
		if len(opts.LayerSets) > 0 {
			return nil, fmt.Errorf("LoadOptions.Tiers and LoadOptions.LayerSets: a tier ladder switches the whole model, layer sets switch per layer; use one")
		}
		if err := llamacpp.CheckLadder(opts.Tiers); err != nil {
			return nil, err
		}
	}
	if kind == "auto" || kind == "native" {
		switch {
		case nativeLoader == nil && kind == "native":
			return nil, fmt.Errorf("the native engine is not available in this build")
		case opts.NoMmap && kind == "native":
			return nil, fmt.Errorf("the native engine always maps the weights (LoadOptions.NoMmap): it owns their residency with madvise")
		case opts.NoMmap:
			fmt.Fprintf(notices, "edgellm: LoadOptions.NoMmap: using the llamacpp engine (the native engine always maps the weights)\n")
		case nativeLoader != nil && native.Supported(f.Arch()):
			e, err := nativeLoader(first, opts)
			if err == nil {
				if kind == "auto" {
					fmt.Fprintf(notices, "edgellm: engine native: architecture %q runs on the native engine (%s)\n", f.Arch(), strings.Join(native.FamilyNames(), ", "))
				}
				return e, nil
			}
			if kind == "native" || (len(opts.Tiers) == 0 && f.Arch() == "llama") {
				return e, err
			}
			// A ladder the native engine cannot map as weight sets (e.g.
			// tiers of different shapes), or a file of a native family
			// whose metadata the native graph refuses: llamacpp runs it.
			fmt.Fprintf(notices, "edgellm: the native engine cannot run this %s (%v); using llamacpp\n", map[bool]string{true: "tier ladder", false: "model"}[len(opts.Tiers) > 0], err)
		case kind == "native":
			return nil, fmt.Errorf("%s: architecture %q is not supported by the native engine", first, f.Arch())
		case nativeLoader != nil:
			fmt.Fprintf(notices, "edgellm: architecture %q is not supported by the native engine; using llamacpp\n", f.Arch())
		}
	}
	if opts.Kernels == "edgellm" {
		return nil, fmt.Errorf("%s: LoadOptions.Kernels \"edgellm\" needs the native engine", first)
	}
	if opts.ShareAnchors {
		return nil, fmt.Errorf("%s: LoadOptions.ShareAnchors needs the native engine (llama.cpp's KV has no anchor zones)", first)
	}
	if len(opts.LayerSets) > 0 {
		return nil, fmt.Errorf("%s: layer sets (per-layer precision) need the native engine and a model of a family it runs", first)
	}
	if opts.RepackLayers != 0 {
		return nil, fmt.Errorf("%s: only the native engine repacks some layers (llama.cpp repacks all or nothing): set LoadOptions.RepackLayers to 0 or LoadOptions.Engine to \"native\"", first)
	}
	lo := llamacpp.Options{NoMmap: opts.NoMmap, Repack: opts.Repack}
	if len(opts.Tiers) > 0 {
		return llamacpp.LoadLadder(opts.Tiers, opts.StartTier, lo)
	}
	return llamacpp.Load(first, lo)
}
