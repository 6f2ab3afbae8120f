// Memory read-bandwidth probe: the denominator of the decode roofline.
//
// Each reader streams its contiguous slice with the widest loads the CPU
// has, into eight independent accumulators (so the adds never wait on one
// another and the loads are the only limit), and returns the wrapping sum of
// the words it read. The implementation is chosen at run time (cpuid on
// x86-64; NEON is baseline on arm64): the vector readers carry per-function
// target attributes, so the file builds with the default flags.
#define _GNU_SOURCE
#include "bwprobe.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

// Scalar tail and the portable reader: 8 words per step into 8 sums.
static uint64_t bwp_sum_scalar(const uint64_t *p, size_t n) {
	uint64_t s[8] = {0};
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		for (int l = 0; l < 8; l++) s[l] += p[i + l];
	uint64_t t = 0;
	for (; i < n; i++) t += p[i];
	for (int l = 0; l < 8; l++) t += s[l];
	return t;
}

#if defined(__x86_64__)
#define BWP_T_AVX2 __attribute__((target("avx2")))
#define BWP_T_AVX512 __attribute__((target("avx2,avx512f")))

// 256 bytes (4 lines) per step, 8 ymm sums.
BWP_T_AVX2 static uint64_t bwp_sum_avx2(const uint64_t *p, size_t n) {
	__m256i a[8];
	for (int l = 0; l < 8; l++) a[l] = _mm256_setzero_si256();
	size_t i = 0;
	for (; i + 32 <= n; i += 32)
		for (int l = 0; l < 8; l++)
			a[l] = _mm256_add_epi64(a[l], _mm256_loadu_si256((const __m256i *)(p + i + 4 * l)));
	for (int l = 1; l < 8; l++) a[0] = _mm256_add_epi64(a[0], a[l]);
	uint64_t v[4];
	_mm256_storeu_si256((__m256i *)v, a[0]);
	return v[0] + v[1] + v[2] + v[3] + bwp_sum_scalar(p + i, n - i);
}

// 512 bytes (8 lines) per step, 8 zmm sums.
BWP_T_AVX512 static uint64_t bwp_sum_avx512(const uint64_t *p, size_t n) {
	__m512i a[8];
	for (int l = 0; l < 8; l++) a[l] = _mm512_setzero_si512();
	size_t i = 0;
	for (; i + 64 <= n; i += 64)
		for (int l = 0; l < 8; l++) a[l] = _mm512_add_epi64(a[l], _mm512_loadu_si512((const void *)(p + i + 8 * l)));
	for (int l = 1; l < 8; l++) a[0] = _mm512_add_epi64(a[0], a[l]);
	return (uint64_t)_mm512_reduce_add_epi64(a[0]) + bwp_sum_scalar(p + i, n - i);
}

static int bwp_detect(void) {
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f")) return BWP_AVX512;
	if (__builtin_cpu_supports("avx2")) return BWP_AVX2;
	return BWP_SCALAR;
}
#elif defined(__aarch64__)
// 128 bytes (2 lines) per step, 8 q-register sums.
static uint64_t bwp_sum_neon(const uint64_t *p, size_t n) {
	uint64x2_t a[8];
	for (int l = 0; l < 8; l++) a[l] = vdupq_n_u64(0);
	size_t i = 0;
	for (; i + 16 <= n; i += 16)
		for (int l = 0; l < 8; l++) a[l] = vaddq_u64(a[l], vld1q_u64(p + i + 2 * l));
	for (int l = 1; l < 8; l++) a[0] = vaddq_u64(a[0], a[l]);
	return vgetq_lane_u64(a[0], 0) + vgetq_lane_u64(a[0], 1) + bwp_sum_scalar(p + i, n - i);
}

static int bwp_detect(void) { return BWP_NEON; }
#else
static int bwp_detect(void) { return BWP_SCALAR; }
#endif

int bwp_best_impl(void) {
	static int best = -1; // racy but idempotent
	if (best < 0) best = bwp_detect();
	return best;
}

int bwp_impl_available(int impl) {
	int best = bwp_best_impl();
	if (impl == BWP_SCALAR) return 1;
#if defined(__x86_64__)
	return impl <= best && impl != BWP_NEON;
#else
	return impl == best;
#endif
}

static uint64_t bwp_sum(int impl, const uint64_t *p, size_t n) {
	switch (impl) {
#if defined(__x86_64__)
	case BWP_AVX512:
		return bwp_sum_avx512(p, n);
	case BWP_AVX2:
		return bwp_sum_avx2(p, n);
#elif defined(__aarch64__)
	case BWP_NEON:
		return bwp_sum_neon(p, n);
#endif
	default:
		return bwp_sum_scalar(p, n);
	}
}

void bwp_split(size_t words, int threads, int t, size_t *lo, size_t *hi) {
	size_t lines = words / 8, per = lines / (size_t)threads, extra = lines % (size_t)threads;
	size_t tt = (size_t)t;
	*lo = 8 * (tt * per + (tt < extra ? tt : extra));
	*hi = t == threads - 1 ? words : 8 * ((tt + 1) * per + (tt + 1 < extra ? tt + 1 : extra));
}

typedef struct {
	int impl, threads;
	const uint64_t *buf;
	size_t words;
	atomic_int ready, go, done;
	uint64_t sums[256];
} bwp_run;

typedef struct {
	bwp_run *run;
	int t;
} bwp_arg;

static void bwp_spin(void) {
#if defined(__x86_64__)
	_mm_pause();
#endif
	sched_yield();
}

static void bwp_reader(bwp_run *r, int t) {
	size_t lo, hi;
	bwp_split(r->words, r->threads, t, &lo, &hi);
	r->sums[t] = bwp_sum(r->impl, r->buf + lo, hi - lo);
}

static void *bwp_worker(void *p) {
	bwp_arg *a = p;
	bwp_run *r = a->run;
	atomic_fetch_add(&r->ready, 1);
	while (!atomic_load(&r->go)) bwp_spin();
	bwp_reader(r, a->t);
	atomic_fetch_add(&r->done, 1);
	return NULL;
}

static double bwp_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int bwp_read(int impl, const uint64_t *buf, size_t words, int threads, double *seconds, uint64_t *sum) {
	if (!bwp_impl_available(impl) || threads < 1 || threads > 256) return -1;
	bwp_run *r = calloc(1, sizeof *r);
	pthread_t *tid = calloc((size_t)threads, sizeof *tid);
	bwp_arg *args = calloc((size_t)threads, sizeof *args);
	if (!r || !tid || !args) {
		free(r), free(tid), free(args);
		return -1;
	}
	r->impl = impl, r->threads = threads, r->buf = buf, r->words = words;
	int started = 1, rc = 0;
	for (int t = 1; t < threads; t++, started++) {
		args[t] = (bwp_arg){r, t};
		if (pthread_create(&tid[t], NULL, bwp_worker, &args[t]) != 0) {
			rc = -1;
			break;
		}
	}
	if (rc == 0) {
		while (atomic_load(&r->ready) < threads - 1) bwp_spin();
	}
	double t0 = bwp_now();
	atomic_store(&r->go, 1); // release the readers (and the started ones on failure)
	if (rc == 0) {
		bwp_reader(r, 0);
		while (atomic_load(&r->done) < threads - 1) bwp_spin();
	}
	double t1 = bwp_now();
	for (int t = 1; t < started; t++) pthread_join(tid[t], NULL);
	uint64_t s = 0;
	for (int t = 0; t < threads; t++) s += r->sums[t];
	*seconds = t1 - t0;
	*sum = s;
	free(r), free(tid), free(args);
	return rc;
}

uint64_t *bwp_alloc(size_t bytes) {
	uint64_t *p;
#if defined(__linux__)
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
	madvise(m, bytes, MADV_HUGEPAGE);
#endif
	p = m;
#else
	p = aligned_alloc(4096, bytes);
	if (!p) return NULL;
#endif
	for (size_t i = 0; i < bytes / 8; i++) p[i] = i;
	return p;
}

void bwp_free(uint64_t *buf, size_t bytes) {
#if defined(__linux__)
	munmap(buf, bytes);
#else
	(void)bytes;
	free(buf);
#endif
}
