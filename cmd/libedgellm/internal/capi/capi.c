// The C half of libedgellm: what must be C because Go cannot express it
// (thread-local state; calling a C function pointer).

#include <string.h>
#include "edgellm.h"
#include "capi.h"

static _Thread_local char last_error[512];
// Library callbacks the calling thread is inside: an edgellm call made from
// one must not wait for an engine (the generation holding it is below on
// this very thread).
static _Thread_local int in_callback;

const char *edgellm_last_error(void) { return last_error; }

void edgellm_set_last_error(const char *msg, size_t n) {
    if (n >= sizeof last_error) n = sizeof last_error - 1;
    memcpy(last_error, msg, n);
    last_error[n] = 0;
}

int edgellm_in_callback(void) { return in_callback; }

int edgellm_call_token_callback(edgellm_token_callback cb, const char *text, int32_t len, int32_t token, void *user) {
    in_callback++;
    int r = cb(text, len, token, user);
    in_callback--;
    return r;
}

// The log callback and its user pointer, set as one pair.
static struct { edgellm_log_callback cb; void *user; } log_cb;
static volatile int log_cb_lock;

void edgellm_set_log_callback(edgellm_log_callback cb, void *user) {
    while (__atomic_exchange_n(&log_cb_lock, 1, __ATOMIC_ACQUIRE)) {}
    log_cb.cb = cb;
    log_cb.user = user;
    __atomic_store_n(&log_cb_lock, 0, __ATOMIC_RELEASE);
}

int edgellm_call_log_callback(int32_t level, const char *text) {
    while (__atomic_exchange_n(&log_cb_lock, 1, __ATOMIC_ACQUIRE)) {}
    edgellm_log_callback cb = log_cb.cb;
    void *user = log_cb.user;
    __atomic_store_n(&log_cb_lock, 0, __ATOMIC_RELEASE);
    if (!cb) return 0;
    in_callback++;
    cb(level, text, user);
    in_callback--;
    return 1;
}
