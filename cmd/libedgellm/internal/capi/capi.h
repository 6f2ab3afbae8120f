// Internal declarations shared by the cgo preamble and capi.c.
#ifndef EDGELLM_CAPI_H
#define EDGELLM_CAPI_H
#include <stddef.h>
#include <stdint.h>
void edgellm_set_last_error(const char *msg, size_t n);
int edgellm_call_token_callback(edgellm_token_callback cb, const char *text, int32_t len, int32_t token, void *user);
// How many library callbacks (token, log) the calling thread is inside.
int edgellm_in_callback(void);
// The log callback: set, and call (0 when none is set).
void edgellm_set_log_callback(edgellm_log_callback cb, void *user);
int edgellm_call_log_callback(int32_t level, const char *text);

// The structs as API 1.0 declared them (cmd/libedgellm/testdata/v1.0/edgellm.h),
// for their sizes: a library accepts every size a struct ever had.
struct edgellm_engine_params_v1_0 {
    uint32_t size;
    const char *model_path;
    const char *const *tiers;
    int32_t n_tiers;
    int32_t start_tier;
    const char *engine;
};
struct edgellm_generate_params_v1_0 {
    uint32_t size;
    const char *prompt;
    int32_t n_predict;
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
    float repeat_penalty;
    uint64_t seed;
};
struct edgellm_stats_v1_0 {
    uint32_t size;
    int32_t n_prompt;
    int32_t n_generated;
    double prefill_tok_per_sec;
    double decode_tok_per_sec;
    int32_t n_ctx_used;
    int32_t tier;
    int32_t spec_k;
    int32_t window;
    int64_t policy_calls;
    int64_t policy_failures;
    int64_t policy_revision;
};
struct edgellm_policy_params_v1_0 {
    uint32_t size;
    const char *bundle_path;
    const char *trusted_key;
    const char *inbox_dir;
    const char *state_dir;
    const char *sensors;
    int32_t insecure;
};
struct edgellm_policy_params_v1_1 {
    struct edgellm_policy_params_v1_0 v1_0;
    const char *cache_dir;
};
struct edgellm_policy_params_v1_2 {
    struct edgellm_policy_params_v1_1 v1_1;
    const char *repo;
    const char *repo_root;
    const char *repo_name;
    int64_t repo_poll_ms;
    const char *decision_log;
};
enum {
    size_policy_params_v1_0 = sizeof(struct edgellm_policy_params_v1_0),
    size_policy_params_v1_1 = sizeof(struct edgellm_policy_params_v1_1),
    size_policy_params_v1_2 = sizeof(struct edgellm_policy_params_v1_2),
    size_engine_params_v1_0 = sizeof(struct edgellm_engine_params_v1_0),
    size_generate_params_v1_0 = sizeof(struct edgellm_generate_params_v1_0),
    size_stats_v1_0 = sizeof(struct edgellm_stats_v1_0),
};
#endif
