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
    char buf[256];
};

// Token text is UTF-8 bytes; pieces of a multi-byte character are passed as
// they come (a real app would buffer them); stories260K's are ASCII.
static int on_token(const char *text, int32_t len, int32_t token, void *user) {
    (void)token;
    struct listener *l = user;
    if (len > (int32_t)sizeof l->buf - 1) len = sizeof l->buf - 1;
    memcpy(l->buf, text, (size_t)len);
    l->buf[len] = 0;
    jstring s = (*l->env)->NewStringUTF(l->env, l->buf);
    jboolean more = (*l->env)->CallBooleanMethod(l->env, l->obj, l->on_token, s);
    (*l->env)->DeleteLocalRef(l->env, s);
    return more ? 0 : 1;
}

JNIEXPORT jint JNICALL Java_EdgeLLM_generate(JNIEnv *env, jclass cls, jlong session, jint n, jobject listener) {
    (void)cls;
    struct listener l = {.env = env, .obj = listener};
    jclass lc = (*env)->GetObjectClass(env, listener);
    l.on_token = (*env)->GetMethodID(env, lc, "onToken", "(Ljava/lang/String;)Z");
    struct edgellm_generate_params p;
    edgellm_generate_params_init(&p);
    p.n_predict = n;
    p.temperature = 0;
    return edgellm_generate((edgellm_session)session, &p, on_token, &l);
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
