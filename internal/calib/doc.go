// Package calib measures per-layer precision sensitivity on the native
// engine's weight sets: with one mapped model (set 0 is the base, the
// others are the same model at fewer bits), each layer in turn is moved to
// each other set and a text is teacher-forced; the KL of the logits against
// the base and the perplexity change become the precision manifest
// (internal/precision). It also evaluates whole per-layer assignments (KL
// against the base, perplexity, average bits per weight), which is what the
// calibrated-versus-uniform-versus-random proof is built from.
//
// Nothing is reloaded: switching a layer's set is a pointer change in the
// session (internal/native, sets.go). Not safe for concurrent use.
package calib
