package kernels

/*
#include <stdlib.h>
#include "llama.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"unsafe"
)

// ModelParams configures LoadModel. The zero value loads all weights with mmap
// on the CPU, not repacked (llama.cpp's default is to repack; ours is to keep
// the weights in the reclaimable page cache).
type ModelParams struct {
	// NoMmap reads the weights into anonymous memory instead of mapping the
	// file (use_mmap = false).
	NoMmap bool
	// Mlock pins the weights in RAM (use_mlock).
	Mlock bool
	// VocabOnly loads only the vocabulary and metadata, no weights. A
	// vocab-only Model has a Vocab but cannot create Contexts.
	VocabOnly bool
	// Repack enables llama.cpp's repacked weight layouts (use_extra_bufts):
	// eligible matrices (RepackEligible) are copied into ggml's CPU_REPACK
	// buffer, anonymous memory. Without it (use_extra_bufts = false) weights
	// stay in the mmap'd page cache. It has no effect in a build without
	// CPU_REPACK (RepackAvailable false).
	Repack bool
	// CheckTensors validates tensor data while loading (check_tensors).
	CheckTensors bool
}

// Model is a loaded llama.cpp model (llama_model). Create it with LoadModel
// and release it with Close; every Context created from it must be closed
// first. The Model's methods are safe for concurrent use, but Close must not
// race with them.
type Model struct {
	mu      sync.Mutex // guards ptr against Close, and nCtx
	ptr     *C.struct_llama_model
	vocab   Vocab
	path    string
	params  ModelParams
	nCtx    int // open Contexts
	nVocab  int
	nEmbd   int
	nLayer  int
	nHead   int
	nHeadKV int
	nCtxTr  int
}

// LoadModel loads the GGUF model at path. It checks that the file exists and
// has a GGUF header before calling llama.cpp. Errors are *PathError wrapping
// an *os.PathError, ErrNotGGUF or ErrLoad.
func LoadModel(path string, p ModelParams) (*Model, error) {
	if _, err := ReadModelFileHeader(path); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &PathError{Op: "load", Path: path, Err: err}
	}
	initBackend()

	mp := C.llama_model_default_params()
	mp.n_gpu_layers = 0 // CPU build: no devices to offload to
	mp.use_mmap = C.bool(!p.NoMmap)
	mp.use_mlock = C.bool(p.Mlock)
	mp.vocab_only = C.bool(p.VocabOnly)
	mp.use_extra_bufts = C.bool(p.Repack)
	mp.check_tensors = C.bool(p.CheckTensors)

	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	clearCError()
	ptr := C.llama_model_load_from_file(cpath, mp)
	if ptr == nil {
		return nil, &PathError{Op: "load", Path: path, Err: ErrLoad, Detail: lastCError()}
	}
	m := &Model{ptr: ptr, path: path, params: p}
	m.vocab = Vocab{m: m, ptr: C.llama_model_get_vocab(ptr)}
	m.nVocab = int(C.llama_vocab_n_tokens(m.vocab.ptr))
	m.nEmbd = int(C.llama_model_n_embd(ptr))
	m.nLayer = int(C.llama_model_n_layer(ptr))
	if m.nLayer > 0 { // per-layer accessors abort on a model without layers (vocab-only)
		m.nHead = int(C.llama_model_n_head(ptr))
		m.nHeadKV = int(C.llama_model_n_head_kv(ptr))
	}
	m.nCtxTr = int(C.llama_model_n_ctx_train(ptr))
	return m, nil
}

// Close frees the model. It fails with ErrInUse while Contexts created from
// it are open, and is a no-op on a closed or nil Model.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ptr == nil {
		return nil
	}
	if m.nCtx > 0 {
		return fmt.Errorf("close model %s: %w (%d)", m.path, ErrInUse, m.nCtx)
	}
	C.llama_model_free(m.ptr)
	m.ptr = nil
	m.vocab.ptr = nil
	return nil
}

// live returns the C pointer, or nil if the model is nil or closed.
func (m *Model) live() *C.struct_llama_model {
	if m == nil {
		return nil
	}
	return m.ptr
}

// Path is the file the model was loaded from.
func (m *Model) Path() string { return m.path }

// VocabOnly reports whether only the vocabulary was loaded.
func (m *Model) VocabOnly() bool { return m.params.VocabOnly }

// Vocab is the model's tokenizer. It is owned by the Model and valid until
// the Model is closed; after that its methods fail with ErrClosed.
func (m *Model) Vocab() *Vocab { return &m.vocab }

// NVocab is the number of tokens in the vocabulary.
func (m *Model) NVocab() int { return m.nVocab }

// NEmbd is the embedding width (llama_model_n_embd).
func (m *Model) NEmbd() int { return m.nEmbd }

// NLayer is the number of transformer blocks.
func (m *Model) NLayer() int { return m.nLayer }

// NHead is the number of attention heads.
func (m *Model) NHead() int { return m.nHead }

// NHeadKV is the number of key/value heads (grouped-query attention).
func (m *Model) NHeadKV() int { return m.nHeadKV }

// NCtxTrain is the context length the model was trained with.
func (m *Model) NCtxTrain() int { return m.nCtxTr }

// NParams is the number of parameters (0 if closed).
func (m *Model) NParams() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.live(); p != nil {
		return int64(C.llama_model_n_params(p))
	}
	return 0
}

// Size is the total size of the weight tensors in bytes (0 if closed).
func (m *Model) Size() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.live(); p != nil {
		return int64(C.llama_model_size(p))
	}
	return 0
}

// Desc is llama_model_desc: architecture, size class and file type, e.g.
// "llama ?B all F32".
func (m *Model) Desc() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.live()
	if p == nil {
		return ""
	}
	var buf [256]C.char
	n := C.llama_model_desc(p, &buf[0], C.size_t(len(buf)))
	if n < 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

// Meta returns the metadata value of key as a string (numbers formatted,
// arrays summarised by llama.cpp) and whether the key exists.
func (m *Model) Meta(key string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.metaLocked(key)
}

// metaLocked is Meta with m.mu held.
func (m *Model) metaLocked(key string) (string, bool) {
	p := m.live()
	if p == nil {
		return "", false
	}
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	buf := make([]byte, 128)
	for {
		// Returns the full length (snprintf-style), or -1 if the key is missing.
		n := int(C.llama_model_meta_val_str(p, ckey, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))))
		if n < 0 {
			return "", false
		}
		if n < len(buf) {
			return string(buf[:n]), true
		}
		buf = make([]byte, n+1)
	}
}

// MetaKeys lists the metadata keys of the model file.
func (m *Model) MetaKeys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.live()
	if p == nil {
		return nil
	}
	n := int(C.llama_model_meta_count(p))
	keys := make([]string, 0, n)
	buf := make([]byte, 256)
	for i := 0; i < n; i++ {
		for {
			k := int(C.llama_model_meta_key_by_index(p, C.int32_t(i), (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))))
			if k < 0 {
				break
			}
			if k < len(buf) {
				keys = append(keys, string(buf[:k]))
				break
			}
			buf = make([]byte, k+1)
		}
	}
	return keys
}

// NFF is the feed-forward width (<arch>.feed_forward_length of the first
// layer; 0 if absent).
func (m *Model) NFF() int {
	s, ok := m.Meta(m.Arch() + ".feed_forward_length")
	if !ok {
		return 0
	}
	// Per-layer arrays are summarised as "arr[...]" by llama.cpp: no value.
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return v
}

// Arch is general.architecture, e.g. "llama".
func (m *Model) Arch() string {
	s, _ := m.Meta("general.architecture")
	return s
}

// Name is general.name, "" if absent.
func (m *Model) Name() string {
	s, _ := m.Meta("general.name")
	return s
}

// FileType is general.file_type as a FileType (FileTypeAllF32 if the key is
// absent, as llama.cpp assumes).
func (m *Model) FileType() FileType {
	s, ok := m.Meta("general.file_type")
	if !ok {
		return FileTypeAllF32
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return FileTypeAllF32
	}
	return FileType(v)
}

// headDimK is the key head size: <arch>.attention.key_length when present,
// else n_embd / n_head (llama.cpp's rule). m.mu is held.
func (m *Model) headDimK() int {
	arch, _ := m.metaLocked("general.architecture")
	if s, ok := m.metaLocked(arch + ".attention.key_length"); ok {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			return v
		}
	}
	if m.nHead > 0 {
		return m.nEmbd / m.nHead
	}
	return 0
}

// headDimV is the value head size, as headDimK for value_length. m.mu is held.
func (m *Model) headDimV() int {
	arch, _ := m.metaLocked("general.architecture")
	if s, ok := m.metaLocked(arch + ".attention.value_length"); ok {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			return v
		}
	}
	return m.headDimK()
}
