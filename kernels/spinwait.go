package kernels

/*
#include <stdint.h>
extern int64_t edgellm_spin_limit_ns;
extern int64_t edgellm_spin_sleep_ns;
extern uint64_t edgellm_spin_sleeps;
extern uint64_t edgellm_spin_bounded;
extern uint64_t edgellm_spin_waits[];
static uint64_t edgellm_spin_get_wait(int i) { return __atomic_load_n(&edgellm_spin_waits[i], __ATOMIC_RELAXED); }

static int64_t edgellm_spin_get_limit(void) { return __atomic_load_n(&edgellm_spin_limit_ns, __ATOMIC_RELAXED); }
static void edgellm_spin_set(int64_t limit, int64_t sleep) {
	__atomic_store_n(&edgellm_spin_limit_ns, limit, __ATOMIC_RELAXED);
	__atomic_store_n(&edgellm_spin_sleep_ns, sleep, __ATOMIC_RELAXED);
}
static uint64_t edgellm_spin_get_sleeps(void) { return __atomic_load_n(&edgellm_spin_sleeps, __ATOMIC_RELAXED); }
static uint64_t edgellm_spin_get_bounded(void) { return __atomic_load_n(&edgellm_spin_bounded, __ATOMIC_RELAXED); }
*/
import "C"

import "time"

// DefaultSpinLimit is how long a thread waits at ggml's barrier by spinning
// before it sleeps (spinwait.c). Quiet decode barriers wait a few µs; a
// partner that lost its core waits a scheduler slice, milliseconds.
const DefaultSpinLimit = 100 * time.Microsecond

// spinSleep is one sleep of a bounded wait (plus the kernel's timer slack,
// 50 µs by default).
const spinSleep = 20 * time.Microsecond

func init() { SetSpinLimit(DefaultSpinLimit) }

// SetSpinLimit sets how long a barrier wait spins before it sleeps, for every
// pool in the process; 0 spins without bound, as ggml does. It returns the
// previous limit.
func SetSpinLimit(d time.Duration) time.Duration {
	old := time.Duration(C.edgellm_spin_get_limit())
	if d < 0 {
		d = 0
	}
	C.edgellm_spin_set(C.int64_t(d), C.int64_t(spinSleep))
	return old
}

// SpinLimit is the current limit (0: unbounded).
func SpinLimit() time.Duration { return time.Duration(C.edgellm_spin_get_limit()) }

// SpinStats counts, since the process started, the barrier waits that reached
// the spin limit and the sleeps taken in them. Both stay 0 in a build whose
// ggml was compiled without spinwait.h (not through the Makefile): the
// bound is then not in effect.
type SpinStats struct {
	Bounded uint64 // waits that spun for the whole limit
	Sleeps  uint64 // sleeps taken in those waits
	// Waits[i] counts the waits of 2^i to 2^(i+1) µs that have ended (the
	// last bucket: longer), as far as they are seen: the clock is read
	// every 32 pauses, so a wait is seen only from about a µs, and its
	// length is known to that resolution.
	Waits [14]uint64
}

// ReadSpinStats reads the counters.
func ReadSpinStats() SpinStats {
	st := SpinStats{Bounded: uint64(C.edgellm_spin_get_bounded()), Sleeps: uint64(C.edgellm_spin_get_sleeps())}
	for i := range st.Waits {
		st.Waits[i] = uint64(C.edgellm_spin_get_wait(C.int(i)))
	}
	return st
}
