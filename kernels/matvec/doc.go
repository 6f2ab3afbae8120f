// Package matvec holds edgellm's own matrix-vector kernels for the weight
// types decode spends its time in (Q8_0 and Q4_0, ggml's block layout), for
// n = 1..8 activation rows per call (issue #31): each weight block is loaded
// once per call and multiplied into all n activation rows.
//
// Activations are quantised to blocks of 32 int8 with an f32 scale (like
// ggml's Q8_0 for the vector operand, but the scale kept in f32 and the exact
// integer sum of the block stored beside it, so Q4_0's -8 offset is one
// integer multiply per block).
//
// Batch invariance: every implementation keeps output (r, j) in eight f32
// lanes, lane l += fmaf(dw_b*dx_jb, float(exact integer dot of elements
// 4l..4l+3 of block b)) over blocks b in order, then sums the lanes in one
// fixed tree. Nothing depends on n, on the thread split (threads split
// output rows, never a row's blocks) or on the instruction set, so row j of
// an n-row call is bitwise the single-row call, and the scalar, AVX2 and
// AVX-512 VNNI kernels agree bitwise.
//
// The kernel is chosen at run time (cpuid), never at build time: the C is
// compiled at the portable -march and the AVX2/AVX-512 functions carry
// per-function target attributes.
//
// Not yet wired into the native engine's graph (see kernels/RATIONALE.md,
// "edgellm matvec kernels").
package matvec
