// The C half of libedgellm: what must be C because Go cannot express it
// (a thread-local error buffer; calling a C function pointer).

#include <string.h>
#include "edgellm.h"
#include "capi.h"

static _Thread_local char last_error[512];

const char *edgellm_last_error(void) { return last_error; }

void edgellm_set_last_error(const char *msg, size_t n) {
    if (n >= sizeof last_error) n = sizeof last_error - 1;
    memcpy(last_error, msg, n);
    last_error[n] = 0;
}

int edgellm_call_token_callback(edgellm_token_callback cb, const char *text, int32_t len, int32_t token, void *user) {
    return cb(text, len, token, user);
}
