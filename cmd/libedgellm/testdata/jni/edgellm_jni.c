// The JNI shim an Android app would carry: Java's native methods on
// EdgeLLM mapped onto libedgellm's C API (include/edgellm.h). Handles go to
// Java as longs; tokens come back through a TokenListener.
#include <jni.h>
#include <string.h>

#include "edgellm.h"

JNIEXPORT jlong JNICALL Java_EdgeLLM_engineLoad(JNIEnv *env, jclass cls, jstring model) {
    (void)cls;
    const char *path = (*env)->GetStringUTFChars(env, model, NULL);
    struct edgellm_engine_params p;
    edgellm_engine_params_init(&p);
    p.model_path = path;
    edgellm_engine e = 0;
    int rc = edgellm_engine_load(&p, &e);
    (*env)->ReleaseStringUTFChars(env, model, path);
    return rc == EDGELLM_OK ? (jlong)e : 0;
}

JNIEXPORT jlong JNICALL Java_EdgeLLM_sessionNew(JNIEnv *env, jclass cls, jlong engine) {
    (void)env; (void)cls;
    struct edgellm_session_params p;
    edgellm_session_params_init(&p);
    p.n_threads = 1;
    edgellm_session s = 0;
    return edgellm_session_new((edgellm_engine)engine, &p, &s) == EDGELLM_OK ? (jlong)s : 0;
}

struct listener {
    JNIEnv *env;
    jobject obj;
    jmethodID on_token;
    jchar buf[512];
};

// Token text comes as whole UTF-8 characters (EDGELLM_GENERATE_UTF8_COMPLETE,
// set below), converted here to UTF-16 for NewString: NewStringUTF takes
// Java's "modified UTF-8", in which a 4-byte character (an emoji) is not
// valid and CheckJNI aborts. A held-back partial character arrives as an
// empty piece, which is not passed on.
static int on_token(const char *text, int32_t len, int32_t token, void *user) {
    (void)token;
    struct listener *l = user;
    if (len == 0) return 0;
    const unsigned char *s = (const unsigned char *)text;
    jsize n = 0;
    for (int32_t i = 0; i < len && n < (jsize)(sizeof l->buf / sizeof l->buf[0]) - 2;) {
        uint32_t c = s[i];
        int k = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
        if (k) c &= 0x3F >> k;
        for (int j = 1; j <= k && i + j < len; j++) c = c << 6 | (s[i + j] & 0x3F);
        i += k + 1;
        if (c >= 0x10000) {
            c -= 0x10000;
            l->buf[n++] = (jchar)(0xD800 | c >> 10);
            l->buf[n++] = (jchar)(0xDC00 | (c & 0x3FF));
        } else {
            l->buf[n++] = (jchar)c;
        }
    }
    jstring str = (*l->env)->NewString(l->env, l->buf, n);
    jboolean more = (*l->env)->CallBooleanMethod(l->env, l->obj, l->on_token, str);
    (*l->env)->DeleteLocalRef(l->env, str);
    if ((*l->env)->ExceptionCheck(l->env)) return 1; // the listener threw: stop; Java sees it on return
    return more ? 0 : 1;
}

JNIEXPORT jint JNICALL Java_EdgeLLM_generate(JNIEnv *env, jclass cls, jlong session, jint n, jfloat temperature, jlong seed, jobject listener) {
    (void)cls;
    struct listener l = {.env = env, .obj = listener};
    jclass lc = (*env)->GetObjectClass(env, listener);
    l.on_token = (*env)->GetMethodID(env, lc, "onToken", "(Ljava/lang/String;)Z");
    struct edgellm_generate_params p;
    edgellm_generate_params_init(&p);
    p.n_predict = n;
    p.temperature = temperature;
    p.seed = (uint64_t)seed;
    if (temperature > 1) { // the whole distribution: every token may come up
        p.top_k = 0;
        p.top_p = 1;
        p.min_p = 0;
    }
    p.flags = EDGELLM_GENERATE_UTF8_COMPLETE; // Java strings need whole characters
    return edgellm_generate((edgellm_session)session, &p, on_token, &l);
}

JNIEXPORT jint JNICALL Java_EdgeLLM_sessionReset(JNIEnv *env, jclass cls, jlong session) {
    (void)env; (void)cls;
    return edgellm_session_reset((edgellm_session)session);
}

JNIEXPORT jint JNICALL Java_EdgeLLM_pushThermal(JNIEnv *env, jclass cls, jlong session, jint status) {
    (void)env; (void)cls;
    struct edgellm_sensors r;
    edgellm_sensors_init(&r);
    r.set = EDGELLM_SENSORS_THERMAL;
    r.thermal_status = status;
    return edgellm_sensors_push((edgellm_session)session, &r);
}

JNIEXPORT jint JNICALL Java_EdgeLLM_sessionFree(JNIEnv *env, jclass cls, jlong session) {
    (void)env; (void)cls;
    return edgellm_session_free((edgellm_session)session);
}

JNIEXPORT jint JNICALL Java_EdgeLLM_engineFree(JNIEnv *env, jclass cls, jlong engine) {
    (void)env; (void)cls;
    return edgellm_engine_free((edgellm_engine)engine);
}

JNIEXPORT jstring JNICALL Java_EdgeLLM_lastError(JNIEnv *env, jclass cls) {
    (void)cls;
    return (*env)->NewStringUTF(env, edgellm_last_error());
}
