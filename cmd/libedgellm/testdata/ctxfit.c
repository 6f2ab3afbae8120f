/* The one context rule from C (cmd/libedgellm TestCAPIContextFits): on the
 * model argv[1], for the engine argv[2], n_ctx 0 is min(2048, the model's
 * training context) and an n_ctx above it is refused with
 * EDGELLM_ERR_INVALID_ARGUMENT and a message naming both numbers. Prints
 * "n_ctx 0 -> N" and "n_ctx M -> status S: MESSAGE"; the Go test checks. */
#include <stdio.h>
#include <stdlib.h>
#include "edgellm.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: ctxfit MODEL ENGINE\n");
        return 2;
    }
    struct edgellm_engine_params ep;
    edgellm_engine_params_init(&ep);
    ep.model_path = argv[1];
    ep.engine = argv[2];
    edgellm_engine e;
    if (edgellm_engine_load(&ep, &e) != EDGELLM_OK) {
        fprintf(stderr, "load: %s\n", edgellm_last_error());
        return 1;
    }
    struct edgellm_model_info mi;
    edgellm_model_info_init(&mi);
    if (edgellm_model_info(e, &mi) != EDGELLM_OK) {
        fprintf(stderr, "model_info: %s\n", edgellm_last_error());
        return 1;
    }
    struct edgellm_session_params sp;
    edgellm_session_params_init(&sp);
    sp.n_threads = 1;
    edgellm_session s;
    if (edgellm_session_new(e, &sp, &s) != EDGELLM_OK) {
        fprintf(stderr, "session_new n_ctx 0: %s\n", edgellm_last_error());
        return 1;
    }
    struct edgellm_stats st;
    edgellm_stats_init(&st);
    if (edgellm_session_stats(s, &st) != EDGELLM_OK) {
        fprintf(stderr, "stats: %s\n", edgellm_last_error());
        return 1;
    }
    printf("n_ctx 0 -> %d (trained on %d)\n", st.n_ctx, mi.n_ctx_train);
    edgellm_session_free(s);
    sp.n_ctx = 2 * mi.n_ctx_train;
    int rc = edgellm_session_new(e, &sp, &s);
    printf("n_ctx %d -> status %d: %s\n", sp.n_ctx, rc, rc == EDGELLM_OK ? "" : edgellm_last_error());
    if (rc == EDGELLM_OK) {
        edgellm_session_free(s);
    }
    edgellm_engine_free(e);
    return 0;
}
