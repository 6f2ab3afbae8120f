// The bounded spin of ggml's barrier (see spinwait.h).
//
// ggml_barrier spins on an atomic until the last thread arrives, with no
// bound. When one of the pool's threads loses its core to another process
// for a scheduler slice (milliseconds), every other thread spins for that
// slice at every barrier, several hundred per decode step: the machine's
// cores go to spinning, and the preempted thread waits longer because the
// spinners hold the cores it could have run on. Here a wait that has spun
// for edgellm_spin_limit_ns sleeps instead, a short nanosleep per call
// until the barrier opens: the core goes idle and the kernel's idle balance
// moves a waiting thread onto it.
//
// ggml's pause loop passes no context, so a wait is recognised by time: the
// clock is read every CHECK_EVERY relaxes, and a gap of more than GAP_NS
// since the previous reading starts a new wait.
#include <stdint.h>
#include <sys/prctl.h>
#include <time.h>

#include "cflags/spinwait.h"

// Go sets these (kernels.SetSpinLimit); 0 turns the bound off.
int64_t edgellm_spin_limit_ns = 100000; // kernels.DefaultSpinLimit, set again by Go's init
int64_t edgellm_spin_sleep_ns = 20000;

// Counters for tests and bench: sleeps taken, waits that reached the limit.
uint64_t edgellm_spin_sleeps = 0;
uint64_t edgellm_spin_bounded = 0;

// Waits seen, by length: bucket i counts waits of [2^i, 2^(i+1)) µs (the
// last, longer ones). A wait shorter than CHECK_EVERY pauses is not seen.
#define WAIT_BUCKETS 14
uint64_t edgellm_spin_waits[WAIT_BUCKETS];

#define CHECK_EVERY 32
#define GAP_NS 10000

static __thread uint32_t t_calls;
static __thread int64_t t_start, t_last;
static __thread int t_bounded; // this wait has reached the limit
static __thread int t_slack;   // this thread's timer slack is set

static inline int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void edgellm_spin_pause(void) {
#if defined(__x86_64__)
    __asm__ volatile("pause" ::: "memory");
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
    if ((++t_calls % CHECK_EVERY) != 0) {
        return;
    }
    int64_t now = mono_ns();
    if (now - t_last > GAP_NS) {
        if (t_last > t_start) { // the previous wait's length
            int64_t us = (t_last - t_start) / 1000;
            int b = 0;
            while (us > 1 && b < WAIT_BUCKETS - 1) {
                us >>= 1;
                b++;
            }
            __atomic_fetch_add(&edgellm_spin_waits[b], 1, __ATOMIC_RELAXED);
        }
        t_start = now; // a new wait
        t_bounded = 0;
    }
    t_last = now;
    int64_t limit = __atomic_load_n(&edgellm_spin_limit_ns, __ATOMIC_RELAXED);
    if (limit <= 0 || now - t_start < limit) {
        return;
    }
    if (!t_bounded) {
        t_bounded = 1;
        __atomic_fetch_add(&edgellm_spin_bounded, 1, __ATOMIC_RELAXED);
    }
    if (!t_slack) {
        // The default slack (50 µs) would round every short sleep up to it.
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        t_slack = 1;
    }
    int64_t d = __atomic_load_n(&edgellm_spin_sleep_ns, __ATOMIC_RELAXED);
    struct timespec ts = {0, d > 0 ? d : 1};
    nanosleep(&ts, NULL);
    __atomic_fetch_add(&edgellm_spin_sleeps, 1, __ATOMIC_RELAXED);
    t_last = mono_ns();
}
