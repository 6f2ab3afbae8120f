// spinwait.h is force-included into every C file the build compiles (the
// Makefile's CGO_CFLAGS: -include kernels/spinwait.h). It renames the one
// function through which ggml's thread barrier waits, ggml_thread_cpu_relax
// in ggml-cpu.c (a pause on x86, a yield on arm64, called in the barrier's
// spin loop and in the workers' poll for new work), so that its calls reach
// edgellm_spin_pause in spinwait.c. There a wait spins for a bounded time
// and then sleeps, so that a thread whose partner lost its core to another
// process gives its own core up instead of spinning until the partner is
// scheduled again. See spinwait.c and kernels/RATIONALE.md ("Bounded
// barrier spin").
//
// How: ggml defines `static inline void ggml_thread_cpu_relax(void)` and
// calls `ggml_thread_cpu_relax()`. The macro pastes its argument onto
// EDGELLM_RELAX_, so the definition (argument `void`) becomes ggml's own
// function under another name, unused, and a call (no argument) becomes
// edgellm_spin_relax(). No other file uses the name.
//
// edgellm_spin_pause is weak: a link without the kernels package (cgo's own
// dynamic-import link of each package) resolves it to null, and the relax
// is then ggml's instruction.
#ifndef EDGELLM_SPINWAIT_H
#define EDGELLM_SPINWAIT_H
#if !defined(__cplusplus) && !defined(__ASSEMBLER__)
extern void edgellm_spin_pause(void) __attribute__((weak));

static inline void edgellm_spin_relax(void) {
    if (edgellm_spin_pause) {
        edgellm_spin_pause();
        return;
    }
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

#define ggml_thread_cpu_relax(...) EDGELLM_RELAX_##__VA_ARGS__
#define EDGELLM_RELAX_void ggml_thread_cpu_relax_unbounded(void)
#define EDGELLM_RELAX_ edgellm_spin_relax()
#endif
#endif
