// Work sharing for one matrix-vector call across a thread pool's threads.
// The first thread to arrive deals every thread a static share of the rows
// (a contiguous range, so its software prefetch runs ahead inside it); each
// takes its share chunk by chunk from the front, and a thread whose share
// is done takes chunks from the back of another's. A thread that runs
// slower or arrives late (another process on its core, a noisier vCPU) no
// longer holds every other thread at the barrier after the node: in 1B
// decode at 2 threads the static split left thread 0 waiting ~3 ms per
// token (RATIONALE "Sharing the rows").
//
// The state is per graph node (not per matrix: two sessions may run one
// matrix at once) and all-zero when idle; the last thread to leave a call
// zeroes it again. ggml-cpu calls a node on every thread of the pool and
// starts no node before all threads left the one before (its barrier), so
// no call sees another call's state.
#ifndef EDGELLM_EMV_SPLIT_H
#define EDGELLM_EMV_SPLIT_H

#include <stdatomic.h>
#include <stdint.h>

// EMV_SPLIT_MAX: calls from pools of more threads split statically.
#define EMV_SPLIT_MAX 16

// EMV_SPLIT_BYTES: the state's size; the ggml op allocates it (a multiple
// of the 64-byte line).
#define EMV_SPLIT_BYTES 192

// emv_split: word[i] is thread i's unclaimed units [front, back) as front |
// back << 32 (zero: nothing); dealt is 0 before the deal, 1 while the
// first thread deals, 2 after; done counts the threads that have left.
typedef struct {
	_Atomic uint64_t word[EMV_SPLIT_MAX];
	_Atomic int32_t dealt, done;
} emv_split;

_Static_assert(sizeof(emv_split) <= EMV_SPLIT_BYTES, "emv_split outgrew EMV_SPLIT_BYTES");

// emv_split_begin: the first of nth threads deals the units; the others
// wait the few stores that takes.
static inline void emv_split_begin(emv_split *s, int nth, int64_t units) {
	int32_t z = 0;
	if (atomic_compare_exchange_strong_explicit(&s->dealt, &z, 1, memory_order_acq_rel, memory_order_acquire)) {
		for (int i = 0; i < nth; i++) {
			uint64_t a = (uint64_t)(units * i / nth), b = (uint64_t)(units * (i + 1) / nth);
			atomic_store_explicit(&s->word[i], a | b << 32, memory_order_relaxed);
		}
		atomic_store_explicit(&s->dealt, 2, memory_order_release);
		return;
	}
	while (atomic_load_explicit(&s->dealt, memory_order_acquire) != 2) {
	}
}

// emv_split_next hands thread ith its next chunk [*u0, *u1) of at most chunk
// units: the front of its own share, else the back of another's; *pf1 is
// where the chunk's owner stream ends (the chunk's last pass may prefetch
// up to it). Returns 0 when no unit is left.
static inline int emv_split_next(emv_split *s, int ith, int nth, int64_t chunk, int64_t *u0, int64_t *u1,
                                 int64_t *pf1) {
	uint64_t w = atomic_load_explicit(&s->word[ith], memory_order_acquire);
	for (;;) {
		uint64_t f = w & 0xffffffffu, b = w >> 32;
		if (f >= b) break;
		uint64_t e = b - f > (uint64_t)chunk ? f + (uint64_t)chunk : b;
		if (atomic_compare_exchange_weak_explicit(&s->word[ith], &w, e | b << 32, memory_order_acq_rel,
		                                          memory_order_acquire)) {
			*u0 = (int64_t)f, *u1 = (int64_t)e, *pf1 = (int64_t)b;
			return 1;
		}
	}
	for (int d = 1; d < nth; d++) {
		int j = (ith + d) % nth;
		w = atomic_load_explicit(&s->word[j], memory_order_acquire);
		for (;;) {
			uint64_t f = w & 0xffffffffu, b = w >> 32;
			if (f >= b) break;
			uint64_t lo = b - f > (uint64_t)chunk ? b - (uint64_t)chunk : f;
			if (atomic_compare_exchange_weak_explicit(&s->word[j], &w, f | lo << 32, memory_order_acq_rel,
			                                          memory_order_acquire)) {
				*u0 = (int64_t)lo, *u1 = (int64_t)b, *pf1 = (int64_t)b;
				return 1;
			}
		}
	}
	return 0;
}

// emv_split_end: the last of nth threads to leave zeroes s for the next call.
static inline void emv_split_end(emv_split *s, int nth) {
	if (atomic_fetch_add_explicit(&s->done, 1, memory_order_acq_rel) != nth - 1) return;
	for (int i = 0; i < EMV_SPLIT_MAX; i++) atomic_store_explicit(&s->word[i], 0, memory_order_relaxed);
	atomic_store_explicit(&s->dealt, 0, memory_order_relaxed);
	atomic_store_explicit(&s->done, 0, memory_order_release);
}

#endif
