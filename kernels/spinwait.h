// spinwait.h is force-included into every C file the build compiles (the
// Makefile's CGO_CFLAGS: -include kernels/spinwait.h). It routes the x86
// pause instruction, which ggml's thread barrier (ggml_barrier in
// ggml-cpu.c, reached through ggml_thread_cpu_relax → _mm_pause) executes
// while it waits for its partner threads, to edgellm_spin_pause in
// spinwait.c. There a wait spins for a bounded time and then sleeps, so that
// a thread whose partner lost its core to another process gives its own core
// up instead of spinning until the partner is scheduled again. See
// spinwait.c and kernels/RATIONALE.md ("Bounded barrier spin").
//
// The symbol is weak: a link without the kernels package (cgo's own
// dynamic-import link of each package) resolves it to null and the pause
// stays the plain instruction.
#ifndef EDGELLM_SPINWAIT_H
#define EDGELLM_SPINWAIT_H
#if defined(__x86_64__) && !defined(__cplusplus) && !defined(__ASSEMBLER__)
extern void edgellm_spin_pause(void) __attribute__((weak));
#define __builtin_ia32_pause() (edgellm_spin_pause ? edgellm_spin_pause() : __builtin_ia32_pause())
#endif
#endif
