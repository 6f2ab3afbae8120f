//go:build linux && cgo

package policy

/*
#define _GNU_SOURCE // ppoll
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

// edgellm_wd is the native deadline watchdog: a POSIX thread that never
// enters Go unless a call passed its deadline. arm (on the calling thread)
// records the call's start; the thread sleeps in ppoll on wake_fd until the
// armed call's expiry or a deadline later, and writes fire_fd once per call
// that it finds past its deadline (a Go goroutine then stops it).
typedef struct {
	_Atomic long long start;          // CLOCK_MONOTONIC ns of the armed call, 0 = none
	_Atomic long long d;              // its deadline, ns
	_Atomic unsigned long long armed; // calls armed so far
	_Atomic long long next;           // when the thread looks next (LLONG_MAX: idle)
	_Atomic int quit;
	int wake_fd, fire_fd;
	pthread_t th;
} edgellm_wd;

static long long edgellm_mono(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void edgellm_wd_sleep(edgellm_wd *w, long long wait) {
	struct pollfd pf = {w->wake_fd, POLLIN, 0};
	struct timespec ts = {wait / 1000000000LL, wait % 1000000000LL};
	if (ppoll(&pf, 1, wait < 0 ? NULL : &ts, NULL) > 0) {
		uint64_t v;
		if (read(w->wake_fd, &v, sizeof v) < 0) {}
	}
}

static void *edgellm_wd_main(void *p) {
	edgellm_wd *w = p;
	unsigned long long seen = 0, reported = 0;
	while (!atomic_load(&w->quit)) {
		long long now = edgellm_mono();
		long long s = atomic_load(&w->start), d = atomic_load(&w->d);
		unsigned long long a = atomic_load(&w->armed);
		long long wait;
		if (s != 0) {
			if (now - s >= d) {
				if (a != reported) {
					uint64_t one = 1;
					reported = a;
					if (write(w->fire_fd, &one, sizeof one) < 0) {}
				}
				wait = d;
			} else {
				wait = s + d - now;
			}
			seen = a;
		} else if (a != seen) {
			seen = a;
			wait = d;
		} else {
			atomic_store(&w->next, LLONG_MAX); // idle: the next arm wakes it
			if (atomic_load(&w->armed) != a || atomic_load(&w->start) != 0) continue;
			wait = -1;
		}
		if (wait >= 0) atomic_store(&w->next, now + wait);
		edgellm_wd_sleep(w, wait);
	}
	return NULL;
}

static edgellm_wd *edgellm_wd_new(long long d) {
	edgellm_wd *w = calloc(1, sizeof *w);
	if (!w) return NULL;
	atomic_store(&w->d, d);
	atomic_store(&w->next, LLONG_MAX);
	w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->fire_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->wake_fd < 0 || w->fire_fd < 0 || pthread_create(&w->th, NULL, edgellm_wd_main, w) != 0) {
		if (w->wake_fd >= 0) close(w->wake_fd);
		if (w->fire_fd >= 0) close(w->fire_fd);
		free(w);
		return NULL;
	}
	return w;
}

// edgellm_wd_arm records a call of deadline d starting now, and wakes the
// thread when it is idle or would look after this call's expiry.
static void edgellm_wd_arm(edgellm_wd *w, long long d) {
	long long now = edgellm_mono();
	atomic_store(&w->d, d);
	atomic_store(&w->start, now);
	atomic_fetch_add(&w->armed, 1);
	if (now + d < atomic_load(&w->next)) {
		uint64_t one = 1;
		atomic_store(&w->next, now + d);
		if (write(w->wake_fd, &one, sizeof one) < 0) {}
	}
}

static void edgellm_wd_disarm(edgellm_wd *w) { atomic_store(&w->start, 0); }

// edgellm_wd_free stops the thread and releases it; fire_fd is the Go
// side's to close.
static void edgellm_wd_free(edgellm_wd *w) {
	uint64_t one = 1;
	atomic_store(&w->quit, 1);
	if (write(w->wake_fd, &one, sizeof one) < 0) {}
	pthread_join(w->th, NULL);
	close(w->wake_fd);
	free(w);
}
*/
import "C"

import (
	"os"
	"time"
)

// nativeWatchdog is the deadline watchdog on Linux with cgo: a POSIX
// thread outside the Go runtime sleeps in ppoll and looks at the armed
// call at its expiry (or a deadline later while calls go on); only a call
// past its deadline makes it write an eventfd that a goroutine (parked in
// the network poller) reads, and that goroutine stops the call by the
// expiry rules. So the Go scheduler does no work per deadline: a goroutine
// woken once per deadline kept the runtime's monitor thread polling at its
// fastest rate, ~10 ms of its CPU per 300 ms decode run (stories260K,
// per-thread schedstat), 3% of decode CPU.
type nativeWatchdog struct {
	w    *C.edgellm_wd
	fire *os.File
}

// newNativeWatchdog starts the thread for s; nil when it cannot (the Go
// watchdog is then used).
func newNativeWatchdog(s *stopTimer) *nativeWatchdog {
	w := C.edgellm_wd_new(C.longlong(s.exp.d))
	if w == nil {
		return nil
	}
	n := &nativeWatchdog{w: w, fire: os.NewFile(uintptr(w.fire_fd), "deadline watchdog")}
	go func() {
		var buf [8]byte
		for {
			if _, err := n.fire.Read(buf[:]); err != nil {
				return // closed
			}
			s.chase()
		}
	}()
	return n
}

func (n *nativeWatchdog) arm(d time.Duration) { C.edgellm_wd_arm(n.w, C.longlong(d)) }
func (n *nativeWatchdog) disarm()             { C.edgellm_wd_disarm(n.w) }

func (n *nativeWatchdog) close() {
	C.edgellm_wd_free(n.w)
	n.fire.Close()
}
