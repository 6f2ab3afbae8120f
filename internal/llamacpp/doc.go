// Package llamacpp is the reference engine: llama.cpp's own llama_decode behind
// the engine.Engine interface, through our kernels binding. It is the
// correctness oracle and speed anchor for the native engine, and it runs every
// architecture the native engine does not cover.
//
// Tier swap here is a real KV migration (see tier.go): the sequence state is
// serialised into a memfd buffer owned by the host, the model is freed, the
// next tier is loaded and the state restored into a fresh context.
//
// An Engine and its Sessions are not safe for concurrent use. Sessions must be
// closed before their Engine.
package llamacpp
