// C helpers for the kernels package: the log callback that llama.cpp and ggml
// call, the abort flag that llama_decode polls, and the edgellm ops' node
// state. Implemented in shim.c.
#ifndef EDGELLM_KERNELS_SHIM_H
#define EDGELLM_KERNELS_SHIM_H

#include <stddef.h>
#include "llama.h"

// edgellm_log_install points llama.cpp's and ggml's log output at
// edgellm_log_cb. Messages below the threshold never reach Go.
void edgellm_log_install(void);
// edgellm_log_set_level sets the lowest ggml_log_level that is forwarded to Go
// (GGML_LOG_LEVEL_NONE+... ; a value above GGML_LOG_LEVEL_ERROR silences all).
void edgellm_log_set_level(int level);
// edgellm_log_set_tap makes INFO messages reach Go's tap (for quantize
// progress) regardless of the level threshold, while tap != 0.
void edgellm_log_set_tap(int tap);
// edgellm_log_last_error copies the first ERROR message logged since the last
// edgellm_log_clear_error into buf (NUL-terminated, truncated) and returns its
// length (0 if none).
size_t edgellm_log_last_error(char * buf, size_t n);
// edgellm_log_clear_error forgets the recorded ERROR message.
void edgellm_log_clear_error(void);

// The abort flag llama_decode polls (ggml_abort_callback). data points to an
// int the Go side sets with edgellm_abort_set.
bool edgellm_abort_cb(void * data);
void edgellm_abort_set(int * flag, int v);
int  edgellm_abort_get(int * flag);

// edgellm_split_state is bytes of zeroed memory on their own 64-byte lines
// in ctx's metadata memory (ggml_new_buffer): an edgellm matmul node's
// row-sharing state (kernels/matvec/emv_split.h), per node and freed with
// the context. The caller checks the context has room.
void * edgellm_split_state(struct ggml_context * ctx, size_t bytes);

#endif
