// capi_v1_0_test: a program built against the API 1.0 header
// (testdata/v1.0/edgellm.h, kept as it was released) run against this
// library, whose structs have grown since. Every struct the library writes
// (the 1.0 *_init functions, edgellm_session_stats) sits between guard
// canaries that must stay intact: a library writing its own, larger sizeof
// into an old caller's struct corrupts the caller's stack. Then it
// generates the golden text through the 1.0 structs.
//
//   capi_v1_0_test MODEL
//
// Built with -I testdata/v1.0 by TestCAPIOldHeader; prints "N passed, M failed".
#include <stdio.h>
#include <string.h>

#include "edgellm.h"

#if EDGELLM_API_VERSION_MINOR != 0
#error "capi_v1_0_test must be compiled against the 1.0 header (-I testdata/v1.0)"
#endif

static int passed, failed;

#define CHECK(cond, ...)                                        \
    do {                                                        \
        if (cond) {                                             \
            passed++;                                           \
        } else {                                                \
            failed++;                                           \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);         \
            printf(__VA_ARGS__);                                \
            printf(" (last error: %s)\n", edgellm_last_error()); \
        }                                                       \
    } while (0)

#define GUARD 64
#define GUARDED(T) struct { unsigned char before[GUARD]; T v; unsigned char after[GUARD]; }

static int intact(const unsigned char *g) {
    for (int i = 0; i < GUARD; i++)
        if (g[i] != 0xA5) return 0;
    return 1;
}

#define FILL(x) memset(&(x), 0xA5, sizeof(x))
#define CHECK_GUARDS(x, what) \
    CHECK(intact((x).before) && intact((x).after), "%s wrote outside the caller's %zu-byte struct", what, sizeof((x).v))

static const char *golden = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";

struct collect {
    char text[4096];
    size_t len;
};

static int collect_cb(const char *text, int32_t len, int32_t token, void *user) {
    (void)token;
    struct collect *c = user;
    if (c->len + (size_t)len < sizeof c->text - 1) {
        memcpy(c->text + c->len, text, (size_t)len);
        c->len += (size_t)len;
        c->text[c->len] = 0;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL\n", argv[0]);
        return 2;
    }
    int32_t major = 0, minor = 0;
    edgellm_api_version(&major, &minor);
    CHECK(major == EDGELLM_API_VERSION_MAJOR && minor > EDGELLM_API_VERSION_MINOR,
          "library %d.%d is not a newer minor than this header's %d.%d", major, minor, EDGELLM_API_VERSION_MAJOR,
          EDGELLM_API_VERSION_MINOR);

    GUARDED(struct edgellm_engine_params) ep;
    FILL(ep);
    edgellm_engine_params_init(&ep.v);
    CHECK_GUARDS(ep, "edgellm_engine_params_init");
    CHECK(ep.v.size == sizeof ep.v, "engine params size %u, the 1.0 struct is %zu", ep.v.size, sizeof ep.v);

    GUARDED(struct edgellm_session_params) sp;
    FILL(sp);
    edgellm_session_params_init(&sp.v);
    CHECK_GUARDS(sp, "edgellm_session_params_init");

    GUARDED(struct edgellm_generate_params) gp;
    FILL(gp);
    edgellm_generate_params_init(&gp.v);
    CHECK_GUARDS(gp, "edgellm_generate_params_init");
    CHECK(gp.v.size == sizeof gp.v && gp.v.n_predict == 128, "generate params size %u (1.0: %zu), n_predict %d",
          gp.v.size, sizeof gp.v, gp.v.n_predict);

    GUARDED(struct edgellm_sensors) rd;
    FILL(rd);
    edgellm_sensors_init(&rd.v);
    CHECK_GUARDS(rd, "edgellm_sensors_init");

    GUARDED(struct edgellm_policy_params) pp;
    FILL(pp);
    edgellm_policy_params_init(&pp.v);
    CHECK_GUARDS(pp, "edgellm_policy_params_init");

    GUARDED(struct edgellm_stats) st;
    FILL(st);
    edgellm_stats_init(&st.v);
    CHECK_GUARDS(st, "edgellm_stats_init");
    CHECK(st.v.size == sizeof st.v, "stats size %u, the 1.0 struct is %zu", st.v.size, sizeof st.v);

    // The 1.0 structs work for every call.
    ep.v.model_path = argv[1];
    edgellm_engine e = 0;
    int rc = edgellm_engine_load(&ep.v, &e);
    CHECK(rc == EDGELLM_OK, "engine_load with a 1.0 struct: rc %d", rc);
    if (rc != EDGELLM_OK) goto out;
    sp.v.n_threads = 1;
    edgellm_session s = 0;
    CHECK(edgellm_session_new(e, &sp.v, &s) == EDGELLM_OK, "session_new");
    gp.v.n_predict = 64;
    gp.v.temperature = 0;
    struct collect c = {0};
    rc = edgellm_generate(s, &gp.v, collect_cb, &c);
    CHECK(rc == EDGELLM_OK && strncmp(c.text, golden, strlen(golden)) == 0, "generate with a 1.0 struct: rc %d \"%s\"", rc, c.text);
    rd.v.set = EDGELLM_SENSORS_BATTERY;
    rd.v.battery_pct = 50;
    CHECK(edgellm_sensors_push(s, &rd.v) == EDGELLM_OK, "sensors_push");

    // An out struct: the library writes at most the caller's size.
    FILL(st);
    edgellm_stats_init(&st.v);
    rc = edgellm_session_stats(s, &st.v);
    CHECK_GUARDS(st, "edgellm_session_stats");
    CHECK(rc == EDGELLM_OK && st.v.n_generated == 64 && st.v.size == sizeof st.v, "session_stats: rc %d, generated %d",
          rc, st.v.n_generated);

    CHECK(edgellm_session_free(s) == EDGELLM_OK && edgellm_engine_free(e) == EDGELLM_OK, "free");
out:
    printf("capi_v1_0: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
