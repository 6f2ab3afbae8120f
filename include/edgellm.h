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
 *   sizeof(the struct) as its header declares it: the static inline
 *   edgellm_*_init(p) below do, through edgellm_*_init_sized(p, sizeof *p),
 *   which writes exactly `size` bytes (never more than the caller has).
 *   A library accepts the sizes of every earlier version of a struct, so an
 *   old caller keeps working when a struct grows: fields it does not have
 *   take their defaults, and an out struct (edgellm_stats) is written only
 *   up to its size. A size this library does not know (from a newer header,
 *   or garbage) is EDGELLM_ERR_STRUCT_SIZE.
 *   The library also exports the 1.0 functions edgellm_*_init(p) for
 *   programs built against the 1.0 header: they write the 1.0 struct size
 *   forever (the header's static inline functions of the same names replace
 *   them in programs built against this one).
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
 * - edgellm_cancel, edgellm_sensors_push, edgellm_device_sensors_push,
 *   edgellm_session_stats, edgellm_log_set, edgellm_log_level,
 *   edgellm_last_error and edgellm_api_version never wait for a generation:
 *   call them from the UI thread, a sensor callback or a watchdog while
 *   another thread generates.
 * - The token callback runs on the thread that called edgellm_generate.
 * - Inside a callback of the library (token or log), calls that would wait
 *   for an engine return EDGELLM_ERR_BUSY at once instead of deadlocking:
 *   edgellm_engine_load/free, session_new/free/reset/save/restore,
 *   generate (on any session), policy_attach, tokenize, detokenize,
 *   model_info and chat_apply. The calls above that never wait, and
 *   edgellm_policy_load, work there.
 * - edgellm_session_free while that session generates returns
 *   EDGELLM_ERR_BUSY; a generate that starts after the free returns
 *   EDGELLM_ERR_BAD_HANDLE. A generation never runs on a freed session.
 *
 * Go runtime caveats (the library is Go with llama.cpp inside):
 * - One Go c-shared library per process: two Go-built .so files (this one
 *   and another Go library) each start a Go runtime and conflict.
 * - The Go runtime installs signal handlers (SIGSEGV, SIGPROF, SIGURG, ...)
 *   with SA_ONSTACK. A host with its own handlers (the JVM, crash
 *   reporters) must chain them: on a JVM preload libjsig.so; install your
 *   handlers before loading the library, or with SA_ONSTACK.
 * - The library cannot be unloaded: dlclose does not unmap it (the Go
 *   runtime's threads keep running); load it once per process.
 * - edgellm_policy_attach compiles the policy's WebAssembly unless the
 *   compilation cache has it (edgellm_policy_params.cache_dir; measured on a
 *   busy 2-core desktop: ~3 s without, 0.1-0.45 s with): set cache_dir, and
 *   attach before the user waits for the first token.
 *
 * Ownership: a session must be freed before its engine, a policy before its
 * session. Freeing out of order is refused with EDGELLM_ERR_BUSY.
 */
#ifndef EDGELLM_H
#define EDGELLM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API version this header declares. A library of the same major serves
 * callers of any minor up to its own; edgellm_api_version returns the
 * library's. */
#define EDGELLM_API_VERSION_MAJOR 1
#define EDGELLM_API_VERSION_MINOR 5

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
    EDGELLM_ERR_BUSY = 9,             /* the session is generating, has dependants, or the call came from a callback */
    EDGELLM_ERR_INTERNAL = 10,        /* anything else; the message says what */
    EDGELLM_ERR_TOO_SMALL = 11        /* (1.1) an output buffer is too small; *n_out says how much is needed */
} edgellm_status;

typedef uint64_t edgellm_engine;
typedef uint64_t edgellm_session;
typedef uint64_t edgellm_policy;

/* Called once per generated token with its text (not NUL-terminated; len
 * bytes, valid only during the call). Return 0 to continue, anything else
 * to stop: edgellm_generate then returns EDGELLM_ERR_CANCELLED.
 * With EDGELLM_GENERATE_UTF8_COMPLETE the text is only whole UTF-8
 * characters: the bytes of a character split across tokens are held back
 * (len may be 0) and passed with the token that completes it; a byte that
 * can start no valid character becomes U+FFFD. Bytes still held when the
 * generation ends are passed (as U+FFFD) in one last call with token
 * EDGELLM_TOKEN_NONE, whose return value is ignored. */
#define EDGELLM_TOKEN_NONE (-1)
typedef int (*edgellm_token_callback)(const char *text, int32_t len, int32_t token, void *user);

/* ---- engine ---------------------------------------------------------- */

struct edgellm_engine_params {
    uint32_t size;            /* sizeof(struct edgellm_engine_params) */
    const char *model_path;   /* a GGUF file (ignored when n_tiers > 0) */
    const char *const *tiers; /* tier ladder: GGUF files of one model, high to low precision */
    int32_t n_tiers;          /* 0: no ladder */
    int32_t start_tier;       /* tier loaded first */
    const char *engine;       /* "auto" (NULL), "native" or "llamacpp" */
    /* 1.1: the model from an open file descriptor instead of model_path,
     * e.g. an Android asset stored uncompressed in the APK
     * (AssetFileDescriptor: getParcelFileDescriptor().getFd(),
     * getStartOffset(), getLength()). The library does not close or keep
     * the descriptor. With offset 0 and the whole file the model is mapped
     * from the descriptor; otherwise the range is copied into an unlinked
     * temporary file in TMPDIR (else /data/local/tmp, /tmp) first. */
    int32_t model_fd;         /* -1 (the default): none */
    int64_t model_offset;     /* byte offset of the GGUF data in the file */
    int64_t model_length;     /* its length; 0: to the end of the file */
};

/* ---- session --------------------------------------------------------- */

struct edgellm_session_params {
    uint32_t size;       /* sizeof(struct edgellm_session_params) */
    int32_t n_ctx;       /* context length; 0: min(2048, the model's); above
                          * the model's: EDGELLM_ERR_INVALID_ARGUMENT */
    int32_t n_threads;   /* 0: the CPUs this process may use */
    const char *kv_type; /* "f16" (NULL), "q8_0", "q4_0" */
};

/* ---- model (1.1) -------------------------------------------------------- */

/* What edgellm_model_info reports. The strings belong to the engine and
 * stay valid until edgellm_engine_free. */
struct edgellm_model_info {
    uint32_t size;             /* sizeof(struct edgellm_model_info), set by the caller */
    int32_t n_vocab;
    int32_t n_ctx_train;       /* the context the model was trained with */
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t bos;               /* token ids; -1: none */
    int32_t eos;
    int64_t file_bytes;
    int64_t n_params;
    const char *arch;          /* general.architecture, e.g. "llama" */
    const char *name;          /* general.name, "" if none */
    const char *file_type;     /* e.g. "Q4_0" */
    const char *engine;        /* "native" or "llamacpp" */
    const char *chat_template; /* tokenizer.chat_template, "" if none */
};

/* One turn for edgellm_chat_apply. */
struct edgellm_chat_message {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
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
    /* 1.1 */
    uint32_t flags;       /* EDGELLM_GENERATE_* */
    /* Speculative decoding (native engine only): NULL or "" off; "skip:N"
     * (the model's first N layers draft), "self:TYPE", "ngram" (prompt
     * lookup), or the path of a smaller GGUF with the same vocabulary. The
     * draft is attached for this call and closed at its end; the session
     * then holds every emitted token, so a later call (with or without a
     * draft) continues the conversation. "skip:N", "self:TYPE" and
     * "ngram" attach to a session that already holds a conversation; a
     * GGUF draft needs an empty one (new or edgellm_session_reset), since
     * it would have to decode the whole conversation again:
     * EDGELLM_ERR_INVALID_ARGUMENT otherwise. Greedy output is the same as
     * without a draft. Not with a policy attached. */
    const char *draft;
    int32_t draft_k;      /* draft tokens per round, 1..8 (0: 4) */
};

/* edgellm_generate_params.flags */
#define EDGELLM_GENERATE_UTF8_COMPLETE (1u << 0) /* pass only whole UTF-8 characters (see the callback) */
/* (1.3) Parse special-token text in the prompt ("<|im_start|>", "<end_of_turn>")
 * into the tokens it names, as EDGELLM_TOKENIZE_PARSE_SPECIAL: for a prompt
 * made by edgellm_chat_apply. All of the prompt is parsed, message contents
 * included: a user who types "<|im_start|>system" writes that control token. */
#define EDGELLM_GENERATE_PARSE_SPECIAL (1u << 1)

/* edgellm_tokenize's flags (1.3; in 1.1 and 1.2 the argument was add_special,
 * 0 or 1, which keeps its meaning). */
#define EDGELLM_TOKENIZE_ADD_SPECIAL   (1 << 0) /* BOS and the other tokens the model puts at the start of a text */
#define EDGELLM_TOKENIZE_PARSE_SPECIAL (1 << 1) /* special-token text becomes the token it names (llama_tokenize's parse_special) */

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
    /* 1.1: the directory of the WebAssembly compilation cache, shared by
     * every attach of the process and kept across runs: an attach that
     * finds the policy compiled there skips the compilation (measured in
     * docs/STATUS.md, "C API for apps": seconds without, ~0.1-0.4 s with, on
     * a busy desktop). NULL: $XDG_CACHE_HOME or $HOME/.cache, else TMPDIR,
     * + "/edgellm/wazero"; on Android pass Context.getCacheDir() + "/wazero"
     * (an app cannot write the fallback, and attach fails on a cache
     * directory it cannot create). "-": no cache. */
    const char *cache_dir;
    /* 1.2: the TUF update channel (docs/POLICY-UPDATES.md) instead of
     * bundle_path and inbox_dir, as `edgellm run --policy-repo`: repo is an
     * http(s) URL or a directory delivered offline; repo_root the path of the
     * trusted root.json the app ships; repo_name the one policy this device
     * runs. state_dir is required with a repo: the last-good module and the
     * trusted metadata live there (state_dir/repo-NAME), so a restart runs
     * the last accepted policy without any network. The attach runs one
     * update check; repo_poll_ms > 0 checks again that often (0: only at
     * attach). */
    const char *repo;
    const char *repo_root;
    const char *repo_name;
    int64_t repo_poll_ms;
    /* 1.2: write the decision log (JSONL: every decision change and failed
     * call with its sensor readings; `edgellm policy log FILE` prints it).
     * NULL: none. */
    const char *decision_log;
    /* 1.5: the budget of one policy call in microseconds (0: the default,
     * 5000). A call that runs past it is stopped and answered by the
     * fallback decision (counted in edgellm_stats.policy_failures); time the
     * thread spends waiting for a CPU does not count (host/policy/RATIONALE.md).
     * Raise it where the guest runs slowly (an emulator, a low-end core);
     * negative values are EDGELLM_ERR_INVALID_ARGUMENT. */
    int64_t deadline_us;
};

/* ---- stats ------------------------------------------------------------ */

struct edgellm_stats {
    uint32_t size;             /* sizeof(struct edgellm_stats), set by the caller */
    int32_t n_prompt;          /* last generation: prompt tokens */
    int32_t n_generated;       /*                  generated tokens */
    double prefill_tok_per_sec;
    double decode_tok_per_sec;
    int32_t n_ctx_used;        /* positions in the KV cache; during a generation: the
                                  positions when it started plus its prompt plus the
                                  tokens passed to the callback so far */
    int32_t tier;              /* current tier (0 = highest precision) */
    int32_t spec_k;            /* current speculation length (0 = off) */
    int32_t window;            /* current KV window (0 = full context) */
    int64_t policy_calls;
    int64_t policy_failures;   /* calls answered by the fallback */
    int64_t policy_revision;   /* manifest revision of the running policy (0: none or unsigned) */
    /* 1.1 */
    int32_t n_ctx;             /* the session's context length */
    int32_t generating;        /* 1 while an edgellm_generate runs on the session */
    int64_t draft_proposed;    /* last generation with a draft: tokens drafted */
    int64_t draft_accepted;    /*                                 and accepted */
    /* 1.4 */
    int64_t n_decodes;         /* forward passes (decode batches) the session has run since
                                  created; during a generation: the count when it started.
                                  edgellm_session_restore adds none. */
};

/* ---- logging (1.1) ----------------------------------------------------- */

/* Log levels (llama.cpp's ggml_log_level values). */
#define EDGELLM_LOG_DEBUG 1
#define EDGELLM_LOG_INFO  2
#define EDGELLM_LOG_WARN  3
#define EDGELLM_LOG_ERROR 4
#define EDGELLM_LOG_NONE  5
/* Receives one message of llama.cpp, ggml or the library (NUL-terminated,
 * usually one line ending in a newline; valid only during the call). It
 * may run on any thread, also during edgellm_engine_load and
 * edgellm_generate; it must not call back into the library but for the
 * calls that never wait (the Threads section). */
typedef void (*edgellm_log_callback)(int32_t level, const char *text, void *user);

/* ==== functions ==== */

#ifndef EDGELLM_NO_PROTOTYPES /* defined only inside the library's own build */
/* The library's API version, and its build (edgellm version, llama.cpp
 * commit) as a static string. Either pointer may be NULL. */
int edgellm_api_version(int32_t *major, int32_t *minor);
const char *edgellm_build_info(void);
/* The calling thread's last error message ("" when none). */
const char *edgellm_last_error(void);

/* ---- logging (1.1) ----------------------------------------------------- */
/* Routes every message at or above the log level (default
 * EDGELLM_LOG_ERROR) to cb instead of stderr; NULL cb restores stderr.
 * Process-wide (llama.h's llama_log_set shape). */
int edgellm_log_set(edgellm_log_callback cb, void *user);
/* Sets the lowest level passed on: EDGELLM_LOG_DEBUG .. EDGELLM_LOG_NONE. */
int edgellm_log_level(int32_t level);

/* ---- struct initialisers ------------------------------------------------- */
/* Each writes the defaults of its struct into exactly `size` bytes of p
 * (size = sizeof *p as the caller's header declares it) and sets p->size;
 * EDGELLM_ERR_STRUCT_SIZE (nothing written) for a size it does not know. */
int edgellm_engine_params_init_sized(struct edgellm_engine_params *p, uint32_t size);
int edgellm_session_params_init_sized(struct edgellm_session_params *p, uint32_t size);
int edgellm_generate_params_init_sized(struct edgellm_generate_params *p, uint32_t size);
int edgellm_sensors_init_sized(struct edgellm_sensors *r, uint32_t size);
int edgellm_policy_params_init_sized(struct edgellm_policy_params *p, uint32_t size);
int edgellm_stats_init_sized(struct edgellm_stats *st, uint32_t size);
int edgellm_model_info_init_sized(struct edgellm_model_info *mi, uint32_t size);

/* The way to initialise a struct: static, so a program always passes the
 * size its own header declares. */
static inline void edgellm_engine_params_init(struct edgellm_engine_params *p) { (void)edgellm_engine_params_init_sized(p, (uint32_t)sizeof *p); }
static inline void edgellm_session_params_init(struct edgellm_session_params *p) { (void)edgellm_session_params_init_sized(p, (uint32_t)sizeof *p); }
static inline void edgellm_generate_params_init(struct edgellm_generate_params *p) { (void)edgellm_generate_params_init_sized(p, (uint32_t)sizeof *p); }
static inline void edgellm_sensors_init(struct edgellm_sensors *r) { (void)edgellm_sensors_init_sized(r, (uint32_t)sizeof *r); }
static inline void edgellm_policy_params_init(struct edgellm_policy_params *p) { (void)edgellm_policy_params_init_sized(p, (uint32_t)sizeof *p); }
static inline void edgellm_stats_init(struct edgellm_stats *st) { (void)edgellm_stats_init_sized(st, (uint32_t)sizeof *st); }
static inline void edgellm_model_info_init(struct edgellm_model_info *mi) { (void)edgellm_model_info_init_sized(mi, (uint32_t)sizeof *mi); }

/* ---- engine ---------------------------------------------------------- */
int edgellm_engine_load(const struct edgellm_engine_params *p, edgellm_engine *out);
int edgellm_engine_free(edgellm_engine e);

/* ---- model (1.1) -------------------------------------------------------- */
int edgellm_model_info(edgellm_engine e, struct edgellm_model_info *out);
/* Tokenizes text into tokens[0..n_max). flags: EDGELLM_TOKENIZE_* bits
 * (ADD_SPECIAL: BOS and the other tokens the model puts at the start of a
 * text; PARSE_SPECIAL (1.3): "<|im_end|>" is that control token, not
 * text); other bits are EDGELLM_ERR_INVALID_ARGUMENT. *n_out is the token
 * count; EDGELLM_ERR_TOO_SMALL (with *n_out set) when n_max is less.
 * tokens may be NULL when n_max is 0. */
int edgellm_tokenize(edgellm_engine e, const char *text, int32_t flags,
                     int32_t *tokens, int32_t n_max, int32_t *n_out);
/* The text of n tokens into buf (cap bytes, NUL-terminated); *n_out is its
 * length without the NUL; EDGELLM_ERR_TOO_SMALL (with *n_out set) when
 * cap <= *n_out. A token id out of range is EDGELLM_ERR_INVALID_ARGUMENT. */
int edgellm_detokenize(edgellm_engine e, const int32_t *tokens, int32_t n,
                       char *buf, size_t cap, size_t *n_out);
/* Formats a chat into a prompt with tmpl (NULL: the model's
 * tokenizer.chat_template; or a llama.cpp built-in name such as "chatml").
 * Templates are matched against llama.cpp's built-in ones (no Jinja): an
 * unknown one is EDGELLM_ERR_INVALID_ARGUMENT. add_assistant ends the
 * prompt with the opening of the assistant's turn. buf, cap and n_out as
 * in edgellm_detokenize. The prompt's control tokens are text until
 * parsed: generate it with EDGELLM_GENERATE_PARSE_SPECIAL (1.3). */
int edgellm_chat_apply(edgellm_engine e, const char *tmpl, const struct edgellm_chat_message *msgs,
                       int32_t n_msgs, int32_t add_assistant, char *buf, size_t cap, size_t *n_out);

/* ---- session --------------------------------------------------------- */
int edgellm_session_new(edgellm_engine e, const struct edgellm_session_params *p, edgellm_session *out);
int edgellm_session_free(edgellm_session s);
/* (1.1) Empties the session's context (a new conversation); a policy stays. */
int edgellm_session_reset(edgellm_session s);
/* (1.1) The session's state as bytes an app can keep (a file, a
 * database): the tokens in its context and (1.4) its KV cache cells (only
 * the positions it holds), after a versioned header naming the engine, the
 * model's identity (shape and vocabulary) and the KV type. *n_out is the
 * size (about n_ctx_used x the KV bytes per token); EDGELLM_ERR_TOO_SMALL
 * (with *n_out set) when cap is less; buf may be NULL with cap 0 to ask the
 * size. EDGELLM_ERR_BUSY while a draft model shares the session's KV. */
int edgellm_session_save(edgellm_session s, void *buf, size_t cap, size_t *n_out);
/* (1.1) Replaces the session's context with a saved state of a session of
 * the same model, engine and KV type (and, on the native engine, the same
 * KV window layout): (1.4) the KV cells are copied back, nothing is decoded
 * (edgellm_stats.n_decodes does not move). A state of another model,
 * engine, KV type or window layout, longer than the session's context,
 * truncated or corrupt is EDGELLM_ERR_INVALID_ARGUMENT (the message names
 * what differs) and leaves the session empty. A 1.1-1.3 state (tokens
 * only) is still accepted and restored by decoding its tokens again. */
int edgellm_session_restore(edgellm_session s, const void *buf, size_t n);

/* ---- generation ------------------------------------------------------- */
/* Generates on the session after what it already holds (a new session
 * starts from an empty context). The prompt is not echoed. A policy
 * attached to the session runs before every decode step. */
int edgellm_generate(edgellm_session s, const struct edgellm_generate_params *p,
                     edgellm_token_callback cb, void *user);
/* Stops a running edgellm_generate on s within one decode step (it returns
 * EDGELLM_ERR_CANCELLED). Without a running generation it does nothing. */
int edgellm_cancel(edgellm_session s);

/* ---- sensors pushed by the app -------------------------------------- */
/* (1.1) Records the device's readings (memory, thermal, battery belong to
 * the device, not a session) for the policies of every session, present
 * and future. They take precedence over the kernel's files until they go
 * stale (host/sensors/README.md has the mapping and the staleness rules). */
int edgellm_device_sensors_push(const struct edgellm_sensors *r);
/* Since 1.1 the same as edgellm_device_sensors_push (the readings reach
 * every session); s must be a live session. */
int edgellm_sensors_push(edgellm_session s, const struct edgellm_sensors *r);

/* ---- policy ----------------------------------------------------------- */
/* Loads a policy for the session; from then on it decides before every
 * decode step of edgellm_generate on that session. */
int edgellm_policy_attach(edgellm_session s, const struct edgellm_policy_params *p, edgellm_policy *out);
/* Verifies the bundle at path and swaps it in (hot reload): a revision not
 * above the running one, a bad signature or an expired bundle is refused
 * (EDGELLM_ERR_POLICY) and the running policy keeps running. */
int edgellm_policy_load(edgellm_policy p, const char *bundle_path);
int edgellm_policy_free(edgellm_policy p);

/* ---- stats ------------------------------------------------------------ */
int edgellm_session_stats(edgellm_session s, struct edgellm_stats *out);
#endif /* EDGELLM_NO_PROTOTYPES */

#ifdef __cplusplus
}
#endif
#endif /* EDGELLM_H */
