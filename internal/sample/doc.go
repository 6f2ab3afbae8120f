// Package sample turns logits into a token: greedy, or a seeded random draw
// after repetition penalty, top-k, top-p, min-p and temperature, in llama.cpp's
// order.
//
// A Sampler owns its scratch buffers, so Sample does not allocate. It is not
// safe for concurrent use: use one per sequence. The same seed and the same
// logits give the same tokens on every run.
package sample
