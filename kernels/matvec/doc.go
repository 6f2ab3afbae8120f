// Package matvec holds edgellm's own matrix-vector kernels for the weight
// types decode spends its time in (Q8_0 and Q4_0, ggml's block layout), for
// n = 1..8 activation rows per weight load (issue #31): each weight block is
// loaded (and, for Q4_0, unpacked) once and multiplied into all n rows.
//
// Activations are ggml's Q8_0 blocks (fp16 scale, 32 int8), quantised
// exactly as ggml's quantize_row_q8_0 does (kernels' TestEdgellmActsMatchGGML
// checks the bytes), so inside a ggml graph the kernels read the same bytes
// ggml's own mul_mat would.
//
// Two arithmetic contracts (Contract; Impl.Contract says which one an
// implementation follows, Impl.Reference names that contract's scalar
// reference). C4, every x86 path and NEON dotprod: for weight row r and
// activation row j, per block b in order, eight exact int32 lane sums of 4
// products (elements 4l..4l+3: the grouping of maddubs+madd, vpdpbusd and
// SDOT), s = f32(d_w)*f32(d_a) rounded once, acc[l] = fma(lane[l], s,
// acc[l]), then y = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)). C8, the NEON
// i8mm kernel's: the same with four lanes of 8 products (elements
// 8l..8l+7: what SMMLA sums) and y = (a0+a2) + (a1+a3). Under either,
// y[r][j] depends only on row r, row j and k: row j of an n-row call is
// bitwise the 1-row call (batch invariance, TestBatchInvariant), for any
// split of the rows across threads, and every implementation returns its
// contract's reference's bits (Scalar for C4, Scalar8 for C8;
// TestContracts checks both against a Go model of the contract). The two
// contracts differ in the last bits, so invariance holds per
// implementation: the ggml op always runs Best.
//
// Implementations: portable scalar C (Scalar, C4's reference and the path
// on CPUs with none of the below; Scalar8, C8's reference, on every
// architecture and never Best), AVX2+FMA+F16C, AVX-512 (F/BW/VL/DQ + VNNI:
// two weight rows per zmm, each 256-bit half doing the AVX2 arithmetic),
// and on arm64 NEON with the dot product extension (NEONDot: two SDOTs per
// block are the eight lanes) and, where the CPU also has the int8 matrix
// multiply (i8mm), NEONI8MM (one SMMLA per 8-element chunk gives a 2x2
// tile of two weight rows by two activation rows; at n = 1 SDOT plus a
// pairwise add gives the same 8-product lanes; matvec_arm64.c). The
// kernel is chosen at run time (cpuid on x86-64, getauxval(AT_HWCAP,
// AT_HWCAP2) on arm64), never at build time: the vector functions carry
// per-function target attributes. Available lists only the running
// architecture's implementations.
//
// Float weights (matvec_f32.c, MulFloat): F32 and F16 rows times F32
// activations, 16 f32 lanes per output (element i into lane i % 16 by fma,
// in order; then a fixed fold), the same contract shape: batch-invariant
// and bit-identical across scalar, AVX2 and AVX-512, for any k.
//
// For Q4_0 on x86-64 there is also an interleaved layout of our own (q4x4:
// rows in groups of 4, one 512-bit load of nibbles per block feeding
// vpdpbusd for all 4 rows; PackQ4x4, MulQ4x4, Q4x4CFunc), bitwise the
// plain-block kernels. Its kernel is chosen at run time (Q4x4Impl): AVX-512
// VNNI where present, else AVX2+FMA+F16C (matvec_q4x4_avx2.c: one row's 8
// lanes per ymm from a 128-bit broadcast of its nibbles; maddubs+madd
// lanes, or AVX-VNNI's vpdpbusd ymm where present). ForceQ4x4AVX2 and
// ForceQ4x4AVXVNNI let tests run the AVX2 kernel on any AVX2 CPU.
//
// Decode attention (attn.c, Attn, AttnCFunc): n_q query rows over F16 K
// and V with GQA, ggml_flash_attn_ext's semantics with every sum in F32,
// each (row, head) bitwise the same for any n_q, thread split and
// implementation (scalar, AVX2+FMA+F16C, AVX-512F; AttnUsable is false on
// arm64, where ggml's flash attention stays). kernels.AttnEdgellm runs it
// as a ggml custom op.
//
// Package kernels runs them inside ggml graphs as a custom op
// (GGMLContext.MulMatEdgellm, CFunc, CFuncFloat); Mul and MulFloat run
// them on goroutines for tests and benchmarks.
package matvec
