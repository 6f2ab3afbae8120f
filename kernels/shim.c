// See shim.h.
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "shim.h"
#include "_cgo_export.h"

static int g_level = GGML_LOG_LEVEL_WARN; // forward WARN and ERROR by default
static int g_tap   = 0;
static int g_last  = GGML_LOG_LEVEL_INFO; // level of the previous message, for CONT

static pthread_mutex_t g_err_mu = PTHREAD_MUTEX_INITIALIZER;
static char   g_err[512];
static size_t g_err_len = 0;

static void edgellm_log_cb(enum ggml_log_level level, const char * text, void * user_data) {
    (void) user_data;
    int lvl = (int) level;
    // CONT continues the previous message: it inherits that message's level.
    if (lvl == GGML_LOG_LEVEL_CONT) {
        lvl = __atomic_load_n(&g_last, __ATOMIC_RELAXED);
    } else {
        __atomic_store_n(&g_last, lvl, __ATOMIC_RELAXED);
    }
    if (lvl == GGML_LOG_LEVEL_ERROR && level != GGML_LOG_LEVEL_CONT) {
        size_t n = strlen(text);
        while (n > 0 && (text[n-1] == '\n' || text[n-1] == ' ')) {
            n--;
        }
        // Keep the first non-blank ERROR line since the last clear: it is the
        // root cause; later lines are the callers reporting the failure.
        if (n > 0) {
            if (n >= sizeof(g_err)) {
                n = sizeof(g_err) - 1;
            }
            pthread_mutex_lock(&g_err_mu);
            if (g_err_len == 0) {
                memcpy(g_err, text, n);
                g_err[n] = 0;
                g_err_len = n;
            }
            pthread_mutex_unlock(&g_err_mu);
        }
    }
    int tap = __atomic_load_n(&g_tap, __ATOMIC_RELAXED);
    int fwd = lvl >= __atomic_load_n(&g_level, __ATOMIC_RELAXED);
    if (fwd || (tap && lvl == GGML_LOG_LEVEL_INFO)) {
        edgellmLog(lvl, (char *) text, fwd);
    }
}

void edgellm_log_install(void) {
    llama_log_set(edgellm_log_cb, NULL); // also calls ggml_log_set
}

void edgellm_log_set_level(int level) { __atomic_store_n(&g_level, level, __ATOMIC_RELAXED); }
void edgellm_log_set_tap(int tap)     { __atomic_store_n(&g_tap, tap, __ATOMIC_RELAXED); }

size_t edgellm_log_last_error(char * buf, size_t n) {
    if (n == 0) {
        return 0;
    }
    pthread_mutex_lock(&g_err_mu);
    size_t m = g_err_len < n - 1 ? g_err_len : n - 1;
    memcpy(buf, g_err, m);
    buf[m] = 0;
    pthread_mutex_unlock(&g_err_mu);
    return m;
}

void edgellm_log_clear_error(void) {
    pthread_mutex_lock(&g_err_mu);
    g_err_len = 0;
    pthread_mutex_unlock(&g_err_mu);
}

bool edgellm_abort_cb(void * data) {
    return __atomic_load_n((int *) data, __ATOMIC_RELAXED) != 0;
}

void edgellm_abort_set(int * flag, int v) { __atomic_store_n(flag, v, __ATOMIC_RELAXED); }
int  edgellm_abort_get(int * flag)        { return __atomic_load_n(flag, __ATOMIC_RELAXED); }

void * edgellm_split_state(struct ggml_context * ctx, size_t bytes) {
    uint8_t * p = ggml_new_buffer(ctx, bytes + 63);
    p = (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
    memset(p, 0, bytes);
    return p;
}
