// Package native is edgellm's own transformer forward pass: ggml graphs built
// by our code, over weights we mmap ourselves and a KV cache we allocate
// ourselves (one memfd per session). It runs the llama, qwen2, qwen3, gemma2,
// gemma3 and phi3 architectures with one graph builder: a Family
// (family.go) switches each family's differences on (QKV bias, QK-norm,
// post-norms, GeGLU, embedding scale, soft-capping, sliding layers with their
// own RoPE base, fused QKV and gate-up, LongRoPE), and the loader refuses, by
// name, any metadata key or tensor the graph would not apply.
//
//	e, err := native.Load("model.gguf", native.Options{Threads: 4})
//	s, err := e.NewSession(engine.SessionConfig{NCtx: 2048, KVType: engine.KVF16})
//	err = s.Decode(tokens, engine.LogitsLast)
//	err = s.Logits(len(tokens)-1, logits)
//
// Weights (weights.go) map the whole GGUF MAP_PRIVATE/PROT_READ and point
// ggml tensors into the mapping; every tensor the llama graph needs is
// validated (name, shape, type, range) before any C call. The KV arena
// (kvarena.go) is a memfd carved into per-layer K and V of F32, F16, Q8_0 or
// Q4_0. The forward pass (forward.go) is one graph per batch, so prefill and
// speculative verify are the same code; it is reused across steps while its
// shape is unchanged. Options.ExtraSets maps the same model at other
// precisions beside it; sessions choose per layer which weight set to use
// (sets.go: Session.SetLayerSets, Engine.AdviseUnused), with no KV migration.
// The KV cache can be a ring with anchor positions (ring.go:
// Session.SetWindow), with a window per layer (Session.SetLayerWindows):
// layers sharing a window share a ring, and a layer's slots past its ring
// are released. Under a window a session decodes past its context (context
// shift: the anchors and the most recent tokens), positions keeping their
// absolute values. A window drops the positions it evicts, or merges each
// into the next visible slot with a decay weight (evict.go:
// Session.SetEvict, EvictMerge). The whole pages of the anchor cells are
// private anonymous memory, advised MADV_MERGEABLE while an engine has two
// or more sessions, so KSM keeps one copy of a shared system prompt
// (anchors.go).
// RATIONALE.md explains the non-obvious choices.
//
// An Engine and its Sessions are for one goroutine at a time. Close Sessions
// before their Engine.
package native
