/* A family's chat template through the C API (cmd/libedgellm
 * TestCAPIChatFamilies), on a SYNTHETIC model carrying the family's
 * tokenizer.chat_template and control tokens, rigged so that its greedy
 * reply is the end-of-turn token at once.
 *
 *   chat_family MODEL ENGINE TEMPLATE BUILTIN TEXT=ID...
 *
 * TEMPLATE is the file's tokenizer.chat_template, BUILTIN llama.cpp's name
 * of the family's template, each TEXT=ID a control token and its id. It
 * checks: model_info returns TEMPLATE; chat_apply with the model's template
 * (NULL) equals chat_apply with BUILTIN; each control token's text
 * tokenizes with EDGELLM_TOKENIZE_PARSE_SPECIAL to its one id, and without
 * it to more than one token; the rendered chat tokenizes with the control
 * tokens as ids (as many as the text has); generating it with
 * EDGELLM_GENERATE_PARSE_SPECIAL decodes those tokens and stops at the end
 * of turn before any token. It prints "rendered: ..." and "prompt: ..." (the
 * Go test compares them with llama.cpp's), then "N passed, M failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "edgellm.h"

static int passed, failed;
#define CHECK(cond, ...)                     \
    do {                                     \
        if (cond) {                          \
            passed++;                        \
        } else {                             \
            failed++;                        \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);             \
            printf(" (%s)\n", edgellm_last_error()); \
        }                                    \
    } while (0)

static int count_cb(const char *text, int32_t len, int32_t token, void *user) {
    (void)text, (void)len, (void)token;
    (*(int *)user)++;
    return 0;
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + strlen(needle), needle)) {
        n++;
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: chat_family MODEL ENGINE TEMPLATE BUILTIN TEXT=ID...\n");
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
    CHECK(edgellm_model_info(e, &mi) == EDGELLM_OK && strcmp(mi.chat_template, argv[3]) == 0,
          "model_info chat_template \"%.60s...\", want the file's", mi.chat_template);

    struct edgellm_chat_message msgs[4] = {
        {"system", "Be brief."}, {"user", "Hi there"}, {"assistant", "Hello!"}, {"user", "What is 2+2?"}};
    static char mine[4096], builtin[4096];
    size_t n1 = 0, n2 = 0;
    CHECK(edgellm_chat_apply(e, NULL, msgs, 4, 1, mine, sizeof mine, &n1) == EDGELLM_OK, "chat_apply with the model's template");
    CHECK(edgellm_chat_apply(e, argv[4], msgs, 4, 1, builtin, sizeof builtin, &n2) == EDGELLM_OK, "chat_apply %s", argv[4]);
    CHECK(n1 == n2 && strcmp(mine, builtin) == 0, "the model's template renders\n%s\nnot as %s:\n%s", mine, argv[4], builtin);
    printf("rendered: ");
    for (const char *p = mine; *p; p++) {
        if (*p == '\n') {
            printf("\\n");
        } else {
            putchar(*p);
        }
    }
    printf("\n");

    int32_t ids[16];
    int n_ids = 0, in_text = 0;
    for (int i = 5; i < argc && n_ids < 16; i++) {
        char *eq = strrchr(argv[i], '=');
        if (eq == NULL) {
            fprintf(stderr, "bad TEXT=ID %s\n", argv[i]);
            return 2;
        }
        *eq = 0;
        ids[n_ids++] = atoi(eq + 1);
        int32_t toks[64], n = 0;
        int rc = edgellm_tokenize(e, argv[i], EDGELLM_TOKENIZE_PARSE_SPECIAL, toks, 64, &n);
        CHECK(rc == EDGELLM_OK && n == 1 && toks[0] == ids[n_ids - 1], "%s with PARSE_SPECIAL: rc %d, %d tokens, first %d; want the one id %d",
              argv[i], rc, n, n > 0 ? toks[0] : -1, ids[n_ids - 1]);
        rc = edgellm_tokenize(e, argv[i], 0, toks, 64, &n);
        CHECK(rc == EDGELLM_OK && n > 1, "%s as text: rc %d, %d tokens; want its characters", argv[i], rc, n);
        in_text += count_of(mine, argv[i]);
    }

    static int32_t prompt[2048];
    int32_t np = 0;
    int rc = edgellm_tokenize(e, mine, EDGELLM_TOKENIZE_ADD_SPECIAL | EDGELLM_TOKENIZE_PARSE_SPECIAL, prompt, 2048, &np);
    int n_control = 0;
    printf("prompt:");
    for (int i = 0; i < np; i++) {
        printf(" %d", prompt[i]);
        for (int j = 0; j < n_ids; j++) {
            n_control += prompt[i] == ids[j];
        }
    }
    printf("\n");
    CHECK(rc == EDGELLM_OK && n_control == in_text && in_text > 0, "the rendered chat: rc %d, %d control tokens, the text has %d",
          rc, n_control, in_text);
    const int32_t n_rendered = np;
    int32_t n_bad = 0;
    CHECK(edgellm_tokenize(e, "x", 1 << 5, prompt, 2048, &n_bad) == EDGELLM_ERR_INVALID_ARGUMENT, "tokenize: an unknown flag accepted");

    struct edgellm_session_params sp;
    edgellm_session_params_init(&sp);
    sp.n_ctx = 512;
    sp.n_threads = 1;
    for (int parse = 1; parse >= 0; parse--) {
        edgellm_session s;
        CHECK(edgellm_session_new(e, &sp, &s) == EDGELLM_OK, "session_new");
        struct edgellm_generate_params gp;
        edgellm_generate_params_init(&gp);
        gp.prompt = mine;
        gp.n_predict = 8;
        gp.temperature = 0;
        gp.flags = parse ? EDGELLM_GENERATE_PARSE_SPECIAL : 0;
        int n_cb = 0;
        rc = edgellm_generate(s, &gp, count_cb, &n_cb);
        struct edgellm_stats st;
        edgellm_stats_init(&st);
        edgellm_session_stats(s, &st);
        if (parse) {
            CHECK(rc == EDGELLM_OK && n_cb == 0 && st.n_generated == 0 && st.n_prompt == n_rendered,
                  "generate PARSE_SPECIAL: rc %d, %d callbacks, %d generated, %d prompt tokens (want %d): want a stop at the end of turn at once",
                  rc, n_cb, st.n_generated, st.n_prompt, n_rendered);
            printf("generate with PARSE_SPECIAL: %d prompt tokens, %d generated\n", st.n_prompt, st.n_generated);
        } else {
            printf("generate without it: %d prompt tokens (control tokens as text), %d generated\n", st.n_prompt, st.n_generated);
            CHECK(rc == EDGELLM_OK && st.n_prompt > n_rendered, "generate without PARSE_SPECIAL: %d prompt tokens, want the text's more than %d",
                  st.n_prompt, n_rendered);
        }
        edgellm_session_free(s);
    }
    edgellm_engine_free(e);
    printf("chat_family: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
