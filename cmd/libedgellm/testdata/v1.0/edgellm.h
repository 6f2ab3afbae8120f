/*
 * edgellm.h — the C API of libedgellm, an adaptive on-device LLM runtime.
 *
 * Written for apps that embed the engine: Android through JNI, iOS through
 * Swift, anything that can call C. The shape follows llama.h: opaque handles
 * with init/free pairs, plain structs, one status code per call.
 *
 *   edgellm_engine_load    → edgellm_engine_free      a model (or a tier ladder)
 *   edgellm_session_new    → edgellm_session_free     one sequence and its KV cache
 *   edgellm_policy_attach  → edgellm_policy_free      a signed WebAssembly policy
 *
 * Conventions
 * - Every function returns an edgellm_status; EDGELLM_OK is 0. On any other
 *   status, edgellm_last_error() returns a one-line message for the calling
 *   thread (thread-local; valid until the next edgellm call on that thread).
 * - Handles are numbers from a table, never pointers: a freed, forged or
 *   wrong-kind handle gets EDGELLM_ERR_BAD_HANDLE, never a crash. 0 is never
 *   a valid handle. Freeing twice is EDGELLM_ERR_BAD_HANDLE.
 * - Structs passed in or out start with `size`, which the caller sets to
 *   sizeof(the struct) as its header declares it (the *_init functions do).
 *   A library accepts the sizes of every earlier version of a struct, so an
 *   old caller keeps working when a struct grows; a size this library does
 *   not know (from a newer header, or garbage) is EDGELLM_ERR_STRUCT_SIZE.
 * - Strings are UTF-8 and NUL-terminated; the library copies what it keeps.
 *   Nothing the library returns needs freeing except handles.
 * - No memory of the library's runtime is ever handed to C but the token
 *   text in the callback, which is valid only during the call.
 *
 * Threads
 * - Every function may be called from any thread.
 * - Calls on one engine (and its sessions) are serialised by the library: a
 *   second edgellm_generate on the same engine waits for the first. A second
 *   edgellm_generate on the same *session* while one runs returns
 *   EDGELLM_ERR_BUSY.
 * - edgellm_cancel, edgellm_sensors_push, edgellm_session_stats,
 *   edgellm_last_error and edgellm_api_version never wait for a generation:
 *   call them from the UI thread, a sensor callback or a watchdog while
 *   another thread generates.
 * - The token callback runs on the thread that called edgellm_generate.
 *
 * Ownership: a session must be freed before its engine, a policy before its
 * session. Freeing out of order is refused with EDGELLM_ERR_BUSY.
 */
#ifndef EDGELLM_H
#define EDGELLM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API version this header declares. A library of the same major serves
 * callers of any minor up to its own; edgellm_api_version returns the
 * library's. */
#define EDGELLM_API_VERSION_MAJOR 1
#define EDGELLM_API_VERSION_MINOR 0

typedef enum edgellm_status {
    EDGELLM_OK = 0,
    EDGELLM_ERR_INVALID_ARGUMENT = 1, /* a NULL pointer, an out-of-range value */
    EDGELLM_ERR_BAD_HANDLE = 2,       /* freed, never issued, or another kind */
    EDGELLM_ERR_STRUCT_SIZE = 3,      /* a struct size this library does not know */
    EDGELLM_ERR_IO = 4,               /* a file could not be read or written */
    EDGELLM_ERR_MODEL = 5,            /* not a GGUF model, or one the engine cannot run */
    EDGELLM_ERR_POLICY = 6,           /* a policy bundle was refused (signature, revision, expiry, ABI) */
    EDGELLM_ERR_CANCELLED = 7,        /* edgellm_cancel, or the callback asked to stop */
    EDGELLM_ERR_CONTEXT_FULL = 8,     /* the session's context is full */
    EDGELLM_ERR_BUSY = 9,             /* the session is generating, or has dependants */
    EDGELLM_ERR_INTERNAL = 10         /* anything else; the message says what */
} edgellm_status;

typedef uint64_t edgellm_engine;
typedef uint64_t edgellm_session;
typedef uint64_t edgellm_policy;

/* Called once per generated token with its text (not NUL-terminated; len
 * bytes, valid only during the call). Return 0 to continue, anything else
 * to stop: edgellm_generate then returns EDGELLM_ERR_CANCELLED. */
typedef int (*edgellm_token_callback)(const char *text, int32_t len, int32_t token, void *user);

/* ---- engine ---------------------------------------------------------- */

struct edgellm_engine_params {
    uint32_t size;            /* sizeof(struct edgellm_engine_params) */
    const char *model_path;   /* a GGUF file (ignored when n_tiers > 0) */
    const char *const *tiers; /* tier ladder: GGUF files of one model, high to low precision */
    int32_t n_tiers;          /* 0: no ladder */
    int32_t start_tier;       /* tier loaded first */
    const char *engine;       /* "auto" (NULL), "native" or "llamacpp" */
};

/* ---- session --------------------------------------------------------- */

struct edgellm_session_params {
    uint32_t size;       /* sizeof(struct edgellm_session_params) */
    int32_t n_ctx;       /* context length; 0: min(2048, the model's) */
    int32_t n_threads;   /* 0: the CPUs this process may use */
    const char *kv_type; /* "f16" (NULL), "q8_0", "q4_0" */
};

/* ---- generation ------------------------------------------------------- */

struct edgellm_generate_params {
    uint32_t size;        /* sizeof(struct edgellm_generate_params) */
    const char *prompt;   /* NULL or "": start from BOS */
    int32_t n_predict;    /* tokens to generate, > 0 */
    float temperature;    /* 0: greedy */
    int32_t top_k;        /* 0: off */
    float top_p;          /* 1: off */
    float min_p;          /* 0: off */
    float repeat_penalty; /* 1: off */
    uint64_t seed;
};

/* ---- sensors pushed by the app -------------------------------------- */

/* Which groups of struct edgellm_sensors are set. */
#define EDGELLM_SENSORS_MEMORY  (1u << 0) /* avail/threshold/total bytes, low_memory */
#define EDGELLM_SENSORS_TRIM    (1u << 1) /* trim_level */
#define EDGELLM_SENSORS_THERMAL (1u << 2) /* thermal_status */
#define EDGELLM_SENSORS_BATTERY (1u << 3) /* battery_pct, charging */

struct edgellm_sensors {
    uint32_t size;            /* sizeof(struct edgellm_sensors) */
    uint32_t set;             /* EDGELLM_SENSORS_* bits */
    int64_t avail_mem_bytes;  /* ActivityManager.MemoryInfo.availMem */
    int64_t threshold_bytes;  /* MemoryInfo.threshold */
    int64_t total_mem_bytes;  /* MemoryInfo.totalMem */
    int32_t low_memory;       /* MemoryInfo.lowMemory, 0/1 */
    int32_t trim_level;       /* ComponentCallbacks2.onTrimMemory level: 5,10,15,20,40,60,80 */
    int32_t thermal_status;   /* PowerManager thermal status 0 (NONE) .. 6 (SHUTDOWN) */
    float battery_pct;        /* 0..100 */
    int32_t charging;         /* 0/1 */
};

/* ---- policy ----------------------------------------------------------- */

struct edgellm_policy_params {
    uint32_t size;           /* sizeof(struct edgellm_policy_params) */
    const char *bundle_path; /* a signed bundle (directory or .tar.gz); NULL with an inbox */
    const char *trusted_key; /* ed25519 public key (PEM file), or a trust directory of
                                *.pub keys with an optional "revoked" list of key IDs */
    const char *inbox_dir;   /* NULL, or a directory watched for updates: write a bundle
                                elsewhere, then rename it in (docs/POLICY-UPDATES.md) */
    const char *state_dir;   /* where the highest accepted revision per policy is kept
                                across restarts (rollback protection); NULL: memory only */
    const char *sensors;     /* "live" (NULL): this device, plus what the app pushes */
    int32_t insecure;        /* 1: accept a loose .wasm (development only) */
};

/* ---- stats ------------------------------------------------------------ */

struct edgellm_stats {
    uint32_t size;             /* sizeof(struct edgellm_stats), set by the caller */
    int32_t n_prompt;          /* last generation: prompt tokens */
    int32_t n_generated;       /*                  generated tokens */
    double prefill_tok_per_sec;
    double decode_tok_per_sec;
    int32_t n_ctx_used;        /* positions in the KV cache */
    int32_t tier;              /* current tier (0 = highest precision) */
    int32_t spec_k;            /* current speculation length (0 = off) */
    int32_t window;            /* current KV window (0 = full context) */
    int64_t policy_calls;
    int64_t policy_failures;   /* calls answered by the fallback */
    int64_t policy_revision;   /* manifest revision of the running policy (0: none or unsigned) */
};

/* ==== functions ==== */

#ifndef EDGELLM_NO_PROTOTYPES /* defined only inside the library's own build */
/* The library's API version, and its build (edgellm version, llama.cpp
 * commit) as a static string. Either pointer may be NULL. */
int edgellm_api_version(int32_t *major, int32_t *minor);
const char *edgellm_build_info(void);
/* The calling thread's last error message ("" when none). */
const char *edgellm_last_error(void);

/* ---- engine ---------------------------------------------------------- */
void edgellm_engine_params_init(struct edgellm_engine_params *p);
int edgellm_engine_load(const struct edgellm_engine_params *p, edgellm_engine *out);
int edgellm_engine_free(edgellm_engine e);

/* ---- session --------------------------------------------------------- */
void edgellm_session_params_init(struct edgellm_session_params *p);
int edgellm_session_new(edgellm_engine e, const struct edgellm_session_params *p, edgellm_session *out);
int edgellm_session_free(edgellm_session s);

/* ---- generation ------------------------------------------------------- */
void edgellm_generate_params_init(struct edgellm_generate_params *p);
/* Generates on the session after what it already holds (a new session
 * starts from an empty context). The prompt is not echoed. A policy
 * attached to the session runs before every decode step. */
int edgellm_generate(edgellm_session s, const struct edgellm_generate_params *p,
                     edgellm_token_callback cb, void *user);
/* Stops a running edgellm_generate on s within one decode step (it returns
 * EDGELLM_ERR_CANCELLED). Without a running generation it does nothing. */
int edgellm_cancel(edgellm_session s);

/* ---- sensors pushed by the app -------------------------------------- */
void edgellm_sensors_init(struct edgellm_sensors *r);
/* Records the app's readings for the session's policy. They take precedence
 * over the kernel's files until they go stale (host/sensors/README.md has
 * the mapping and the staleness rules). */
int edgellm_sensors_push(edgellm_session s, const struct edgellm_sensors *r);

/* ---- policy ----------------------------------------------------------- */
void edgellm_policy_params_init(struct edgellm_policy_params *p);
/* Loads a policy for the session; from then on it decides before every
 * decode step of edgellm_generate on that session. */
int edgellm_policy_attach(edgellm_session s, const struct edgellm_policy_params *p, edgellm_policy *out);
/* Verifies the bundle at path and swaps it in (hot reload): a revision not
 * above the running one, a bad signature or an expired bundle is refused
 * (EDGELLM_ERR_POLICY) and the running policy keeps running. */
int edgellm_policy_load(edgellm_policy p, const char *bundle_path);
int edgellm_policy_free(edgellm_policy p);

/* ---- stats ------------------------------------------------------------ */
void edgellm_stats_init(struct edgellm_stats *st);
int edgellm_session_stats(edgellm_session s, struct edgellm_stats *out);
#endif /* EDGELLM_NO_PROTOTYPES */

#ifdef __cplusplus
}
#endif
#endif /* EDGELLM_H */
