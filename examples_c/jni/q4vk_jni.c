/* JNI shim of org.q4vk.Q4vk over the public q4vk C API (q4vk.h) only.
 *
 * Rules it keeps:
 * - Every primitive array it pins is released on every path: inputs with JNI_ABORT, the
 *   GEMV output with 0 (copy back) only on Q4VK_OK and JNI_ABORT otherwise.
 * - No JNI call (and no exception is thrown) while a critical array is held: arrays and
 *   buffers are inspected first, pinned, q4vk is called, they are released, and only then
 *   is an exception raised.
 * - A direct buffer is used from position() to limit(); a non-direct one is an
 *   IllegalArgumentException; a null array or buffer is passed to q4vk as NULL with size 0
 *   (q4vk answers Q4VK_ERROR_NULL_POINTER naming the argument).
 * - Every non-OK status becomes org.q4vk.Q4vkException(status, q4vk_status_str(status),
 *   q4vk_last_error_message()), read on the failing thread right after the call.
 * - The log callback never calls into JNI or q4vk: it counts WARN/ERROR messages (the
 *   validation layer's included) and keeps the last one, behind a mutex.
 */
#include <jni.h>

#include "org_q4vk_Q4vk.h"
#include "q4vk.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ cached classes */

static jclass g_exception;    /* org/q4vk/Q4vkException */
static jmethodID g_exception_init;
static jclass g_iae;          /* java/lang/IllegalArgumentException */
static jclass g_oom;          /* java/lang/OutOfMemoryError */
static jclass g_string;       /* java/lang/String */
static jmethodID g_string_init; /* String(byte[], String charsetName) */
static jstring g_utf8;        /* "UTF-8" */
static jclass g_object;
static jclass g_float_array, g_short_array, g_byte_array;
static jclass g_byte_buffer, g_float_buffer, g_buffer;
static jmethodID g_buffer_position, g_buffer_limit;

static jclass global_class(JNIEnv *env, const char *name) {
    jclass local = (*env)->FindClass(env, name);
    if (!local) return NULL;
    jclass global = (jclass)(*env)->NewGlobalRef(env, local);
    (*env)->DeleteLocalRef(env, local);
    return global;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    (void)reserved;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
    if (!(g_exception = global_class(env, "org/q4vk/Q4vkException")) ||
        !(g_iae = global_class(env, "java/lang/IllegalArgumentException")) ||
        !(g_oom = global_class(env, "java/lang/OutOfMemoryError")) ||
        !(g_string = global_class(env, "java/lang/String")) ||
        !(g_object = global_class(env, "java/lang/Object")) ||
        !(g_float_array = global_class(env, "[F")) || !(g_short_array = global_class(env, "[S")) ||
        !(g_byte_array = global_class(env, "[B")) ||
        !(g_byte_buffer = global_class(env, "java/nio/ByteBuffer")) ||
        !(g_float_buffer = global_class(env, "java/nio/FloatBuffer")) ||
        !(g_buffer = global_class(env, "java/nio/Buffer")))
        return JNI_ERR;
    g_exception_init =
        (*env)->GetMethodID(env, g_exception, "<init>", "(ILjava/lang/String;Ljava/lang/String;)V");
    g_string_init = (*env)->GetMethodID(env, g_string, "<init>", "([BLjava/lang/String;)V");
    g_buffer_position = (*env)->GetMethodID(env, g_buffer, "position", "()I");
    g_buffer_limit = (*env)->GetMethodID(env, g_buffer, "limit", "()I");
    if (!g_exception_init || !g_string_init || !g_buffer_position || !g_buffer_limit) return JNI_ERR;
    jstring utf8 = (*env)->NewStringUTF(env, "UTF-8");
    if (!utf8) return JNI_ERR;
    g_utf8 = (jstring)(*env)->NewGlobalRef(env, utf8);
    (*env)->DeleteLocalRef(env, utf8);
    return g_utf8 ? JNI_VERSION_1_6 : JNI_ERR;
}

/* ------------------------------------------------------------------ errors */

/* A Java String from UTF-8 bytes (q4vk's messages are UTF-8; NewStringUTF expects
   modified UTF-8). NULL with an exception pending on failure. */
static jstring utf8_string(JNIEnv *env, const char *text) {
    jsize len = (jsize)strlen(text);
    jbyteArray bytes = (*env)->NewByteArray(env, len);
    if (!bytes) return NULL;
    (*env)->SetByteArrayRegion(env, bytes, 0, len, (const jbyte *)text);
    jstring s = (jstring)(*env)->NewObject(env, g_string, g_string_init, bytes, g_utf8);
    (*env)->DeleteLocalRef(env, bytes);
    return s;
}

/* Throws Q4vkException for a failed q4vk call on this thread. Call right after it. */
static void throw_status(JNIEnv *env, q4vk_status st) {
    size_t len = q4vk_last_error_message(NULL, 0);
    char *msg = malloc(len + 1);
    if (!msg) {
        (*env)->ThrowNew(env, g_oom, "q4vk_jni: no memory for the error message");
        return;
    }
    q4vk_last_error_message(msg, len + 1);
    jstring name = utf8_string(env, q4vk_status_str(st));
    jstring detail = name ? utf8_string(env, msg) : NULL;
    free(msg);
    if (!detail) return; /* OutOfMemoryError pending */
    jobject ex = (*env)->NewObject(env, g_exception, g_exception_init, (jint)st, name, detail);
    if (ex) (*env)->Throw(env, (jthrowable)ex);
}

static void throw_iae(JNIEnv *env, const char *msg) { (*env)->ThrowNew(env, g_iae, msg); }

/* ------------------------------------------------------------------ arrays and buffers */

enum { KIND_NULL, KIND_ARRAY, KIND_BUFFER };
enum { ELEM_BYTE = 1, ELEM_SHORT = 2, ELEM_FLOAT = 4 };

/* An argument that is null, a float[]/short[]/byte[] or a direct ByteBuffer/FloatBuffer. */
typedef struct {
    jobject obj;
    int kind;
    int elem;     /* bytes per element */
    jsize length; /* array elements */
    void *ptr;    /* pinned array elements or buffer address (+ position) */
    size_t bytes;
    int critical; /* pinned with GetPrimitiveArrayCritical */
    int pinned;
} arg_t;

/* Classifies obj and, for buffers, resolves the address range. Makes JNI calls: never
   call while a critical array is held. Returns 0, or -1 with an exception pending. */
static int inspect(JNIEnv *env, jobject obj, const char *name, int allowed_elems, arg_t *a) {
    memset(a, 0, sizeof *a);
    a->obj = obj;
    if (!obj) return 0;
    char msg[256];
    if ((*env)->IsInstanceOf(env, obj, g_buffer)) {
        int elem = (*env)->IsInstanceOf(env, obj, g_byte_buffer)    ? ELEM_BYTE
                   : (*env)->IsInstanceOf(env, obj, g_float_buffer) ? ELEM_FLOAT
                                                                    : 0;
        if (!elem) {
            snprintf(msg, sizeof msg, "%s: only ByteBuffer and FloatBuffer are accepted", name);
            throw_iae(env, msg);
            return -1;
        }
        char *base = (*env)->GetDirectBufferAddress(env, obj);
        jlong capacity = (*env)->GetDirectBufferCapacity(env, obj);
        if (!base || capacity < 0) {
            snprintf(msg, sizeof msg,
                     "%s: not a direct buffer (use ByteBuffer.allocateDirect, native order)", name);
            throw_iae(env, msg);
            return -1;
        }
        jint pos = (*env)->CallIntMethod(env, obj, g_buffer_position);
        if ((*env)->ExceptionCheck(env)) return -1;
        jint lim = (*env)->CallIntMethod(env, obj, g_buffer_limit);
        if ((*env)->ExceptionCheck(env)) return -1;
        if (pos < 0 || lim < pos || (jlong)lim > capacity) {
            snprintf(msg, sizeof msg, "%s: inconsistent position/limit/capacity", name);
            throw_iae(env, msg);
            return -1;
        }
        a->kind = KIND_BUFFER;
        a->elem = elem;
        a->ptr = base + (size_t)pos * (size_t)elem;
        a->bytes = (size_t)(lim - pos) * (size_t)elem;
        a->pinned = 1;
        return 0;
    }
    int elem = (*env)->IsInstanceOf(env, obj, g_float_array)   ? ELEM_FLOAT
               : (*env)->IsInstanceOf(env, obj, g_short_array) ? ELEM_SHORT
               : (*env)->IsInstanceOf(env, obj, g_byte_array)  ? ELEM_BYTE
                                                               : 0;
    if (!elem || !(elem & allowed_elems)) {
        snprintf(msg, sizeof msg, "%s: wrong array type (expected %s%s%s)", name,
                 allowed_elems & ELEM_FLOAT ? "float[] " : "", allowed_elems & ELEM_SHORT ? "short[] " : "",
                 allowed_elems & ELEM_BYTE ? "byte[] " : "");
        throw_iae(env, msg);
        return -1;
    }
    a->kind = KIND_ARRAY;
    a->elem = elem;
    a->length = (*env)->GetArrayLength(env, (jarray)obj);
    a->bytes = (size_t)a->length * (size_t)elem;
    return 0;
}

/* Pins an inspected array (buffers and null need nothing). critical: for short calls only
   (GEMV); the caller must make no JNI call until every critical array is released.
   Returns 0, or -1 (then an OutOfMemoryError is pending, which the caller may only
   observe after releasing its other critical arrays). */
static int pin(JNIEnv *env, arg_t *a, int critical) {
    if (a->kind != KIND_ARRAY || a->pinned) return 0;
    a->critical = critical;
    if (critical) {
        a->ptr = (*env)->GetPrimitiveArrayCritical(env, (jarray)a->obj, NULL);
    } else if (a->elem == ELEM_FLOAT) {
        a->ptr = (*env)->GetFloatArrayElements(env, (jfloatArray)a->obj, NULL);
    } else if (a->elem == ELEM_SHORT) {
        a->ptr = (*env)->GetShortArrayElements(env, (jshortArray)a->obj, NULL);
    } else {
        a->ptr = (*env)->GetByteArrayElements(env, (jbyteArray)a->obj, NULL);
    }
    if (!a->ptr) return -1;
    a->pinned = 1;
    return 0;
}

/* Releases a pinned array: mode 0 copies back and frees, JNI_ABORT frees only. */
static void unpin(JNIEnv *env, arg_t *a, jint mode) {
    if (a->kind != KIND_ARRAY || !a->pinned) return;
    if (a->critical) {
        (*env)->ReleasePrimitiveArrayCritical(env, (jarray)a->obj, a->ptr, mode);
    } else if (a->elem == ELEM_FLOAT) {
        (*env)->ReleaseFloatArrayElements(env, (jfloatArray)a->obj, (jfloat *)a->ptr, mode);
    } else if (a->elem == ELEM_SHORT) {
        (*env)->ReleaseShortArrayElements(env, (jshortArray)a->obj, (jshort *)a->ptr, mode);
    } else {
        (*env)->ReleaseByteArrayElements(env, (jbyteArray)a->obj, (jbyte *)a->ptr, mode);
    }
    a->pinned = 0;
    a->ptr = NULL;
}

/* A new Java array holding a copy of `bytes` bytes of C data, or NULL with an exception
   pending. elem: ELEM_BYTE, ELEM_SHORT or ELEM_FLOAT. */
static jarray new_array(JNIEnv *env, int elem, const void *data, size_t bytes) {
    size_t count = bytes / (size_t)elem;
    if (count > (size_t)INT32_MAX) {
        throw_iae(env, "q4vk_jni: result too large for a Java array");
        return NULL;
    }
    jsize n = (jsize)count;
    if (elem == ELEM_BYTE) {
        jbyteArray a = (*env)->NewByteArray(env, n);
        if (a) (*env)->SetByteArrayRegion(env, a, 0, n, (const jbyte *)data);
        return a;
    }
    if (elem == ELEM_SHORT) {
        jshortArray a = (*env)->NewShortArray(env, n);
        if (a) (*env)->SetShortArrayRegion(env, a, 0, n, (const jshort *)data);
        return a;
    }
    jfloatArray a = (*env)->NewFloatArray(env, n);
    if (a) (*env)->SetFloatArrayRegion(env, a, 0, n, (const jfloat *)data);
    return a;
}

static jobjectArray object_array(JNIEnv *env, int count, jobject *items) {
    jobjectArray out = (*env)->NewObjectArray(env, count, g_object, NULL);
    for (int i = 0; out && i < count; i++) (*env)->SetObjectArrayElement(env, out, i, items[i]);
    return out;
}

static int weight_elems(jint dtype) { return dtype == Q4VK_DTYPE_F32 ? ELEM_FLOAT : ELEM_SHORT; }

/* ------------------------------------------------------------------ version */

JNIEXPORT jint JNICALL Java_org_q4vk_Q4vk_version(JNIEnv *env, jclass cls) {
    (void)env, (void)cls;
    return (jint)q4vk_version();
}

JNIEXPORT jstring JNICALL Java_org_q4vk_Q4vk_versionString(JNIEnv *env, jclass cls) {
    (void)cls;
    return utf8_string(env, q4vk_version_string());
}

JNIEXPORT jint JNICALL Java_org_q4vk_Q4vk_headerVersion(JNIEnv *env, jclass cls) {
    (void)env, (void)cls;
    return (jint)Q4VK_HEADER_VERSION;
}

/* ------------------------------------------------------------------ CPU quantization */

JNIEXPORT jobjectArray JNICALL Java_org_q4vk_Q4vk_nQ4Quantize(JNIEnv *env, jclass cls, jobject weight,
                                                               jint dtype, jlong n, jlong k,
                                                               jint group_size, jboolean zero_points) {
    (void)cls;
    arg_t w;
    if (inspect(env, weight, "weight", weight_elems(dtype), &w)) return NULL;
    q4vk_matrix_desc d;
    q4vk_matrix_desc_default(&d);
    d.source = Q4VK_SOURCE_FLOAT;
    d.n = (uint64_t)n;
    d.k = (uint64_t)k;
    d.group_size = group_size;
    d.zero_points = zero_points ? 1u : 0u;
    d.dtype = (q4vk_dtype)dtype;
    d.weight_bytes = w.bytes;
    size_t wb = 0, sb = 0, zb = 0;
    q4vk_status st = q4vk_q4_quantize_size(&d, &wb, &sb, &zb);
    if (st != Q4VK_OK) {
        throw_status(env, st);
        return NULL;
    }
    uint8_t *qw = malloc(wb ? wb : 1), *zeros = malloc(zb ? zb : 1);
    void *scales = malloc(sb ? sb : 1);
    jobject parts[3] = {NULL, NULL, NULL};
    jobjectArray result = NULL;
    if (!qw || !scales || !zeros) {
        (*env)->ThrowNew(env, g_oom, "q4vk_jni: no memory for the Q4 output");
        goto done;
    }
    if (pin(env, &w, 0)) goto done; /* OutOfMemoryError pending */
    d.weight = w.ptr;
    st = q4vk_q4_quantize(&d, qw, wb, scales, sb, zb ? zeros : NULL, zb);
    unpin(env, &w, JNI_ABORT);
    if (st != Q4VK_OK) {
        throw_status(env, st);
        goto done;
    }
    if (!(parts[0] = new_array(env, ELEM_BYTE, qw, wb)) || !(parts[1] = new_array(env, ELEM_SHORT, scales, sb)))
        goto done;
    if (zb && !(parts[2] = new_array(env, ELEM_BYTE, zeros, zb))) goto done;
    result = object_array(env, 3, parts);
done:
    free(qw);
    free(scales);
    free(zeros);
    return result;
}

JNIEXPORT jobjectArray JNICALL Java_org_q4vk_Q4vk_nWeightQuantize(JNIEnv *env, jclass cls, jobject weight,
                                                                   jint dtype, jlong k, jlong n, jint arch,
                                                                   jint group_size) {
    (void)cls;
    arg_t w;
    if (inspect(env, weight, "weight", weight_elems(dtype), &w)) return NULL;
    q4vk_weight_quantize_desc d;
    q4vk_weight_quantize_desc_default(&d);
    d.algo = Q4VK_ALGO_WEIGHT_ONLY_INT4;
    d.dtype = (q4vk_dtype)dtype;
    d.arch = arch;
    d.group_size = group_size;
    d.k = (uint64_t)k;
    d.n = (uint64_t)n;
    size_t qb = 0, sb = 0;
    q4vk_status st = q4vk_weight_quantize_size(&d, &qb, &sb);
    if (st != Q4VK_OK) {
        throw_status(env, st);
        return NULL;
    }
    int8_t *q = malloc(qb ? qb : 1);
    void *scale = malloc(sb ? sb : 1);
    jobject parts[2] = {NULL, NULL};
    jobjectArray result = NULL;
    if (!q || !scale) {
        (*env)->ThrowNew(env, g_oom, "q4vk_jni: no memory for the Paddle output");
        goto done;
    }
    if (pin(env, &w, 0)) goto done;
    st = q4vk_weight_quantize(&d, w.ptr, w.bytes, q, qb, scale, sb);
    unpin(env, &w, JNI_ABORT);
    if (st != Q4VK_OK) {
        throw_status(env, st);
        goto done;
    }
    if (!(parts[0] = new_array(env, ELEM_BYTE, q, qb)) ||
        !(parts[1] = new_array(env, dtype == Q4VK_DTYPE_F32 ? ELEM_FLOAT : ELEM_SHORT, scale, sb)))
        goto done;
    result = object_array(env, 2, parts);
done:
    free(q);
    free(scale);
    return result;
}

/* ------------------------------------------------------------------ contexts */

typedef struct {
    q4vk_context *ctx;
    pthread_mutex_t lock;
    jlong messages; /* WARN/ERROR log messages, validation included */
    int validation_on; /* q4vk said (INFO) that the validation layer is enabled */
    char last[1024];
} jctx;

/* q4vk's log callback: no JNI, no q4vk calls, no unwinding. */
static void on_log(void *user, uint32_t level, const char *message) {
    jctx *c = user;
    if (level > Q4VK_LOG_WARN) {
        if (message && strstr(message, "validation layer enabled")) c->validation_on = 1;
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->messages++;
    snprintf(c->last, sizeof c->last, "%s", message ? message : "");
    pthread_mutex_unlock(&c->lock);
}

static jctx *ctx_of(jlong handle) { return (jctx *)(intptr_t)handle; }
static q4vk_context *q4ctx(jlong handle) { return handle ? ctx_of(handle)->ctx : NULL; }

JNIEXPORT jlong JNICALL Java_org_q4vk_Q4vk_nContextCreate(JNIEnv *env, jclass cls, jint flags,
                                                          jbyteArray cache) {
    (void)cls;
    jctx *c = calloc(1, sizeof *c);
    if (!c) {
        (*env)->ThrowNew(env, g_oom, "q4vk_jni: no memory for a context");
        return 0;
    }
    pthread_mutex_init(&c->lock, NULL);
    arg_t blob;
    if (inspect(env, cache, "pipelineCache", ELEM_BYTE, &blob) || pin(env, &blob, 0)) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return 0;
    }
    q4vk_context_desc d;
    q4vk_context_desc_default(&d);
    d.header_version = Q4VK_HEADER_VERSION; /* this shim's header, checked by the library */
    d.flags = (uint32_t)flags;
    d.log = on_log;
    d.log_level = Q4VK_LOG_INFO; /* INFO only to see whether validation is on; counted: WARN/ERROR */
    d.log_user = c;
    d.pipeline_cache_data = blob.ptr;
    d.pipeline_cache_size = blob.bytes;
    q4vk_status st = q4vk_context_create(&d, &c->ctx);
    unpin(env, &blob, JNI_ABORT);
    if (st != Q4VK_OK) {
        throw_status(env, st);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return 0;
    }
    return (jlong)(intptr_t)c;
}

JNIEXPORT jlong JNICALL Java_org_q4vk_Q4vk_nContextDestroy(JNIEnv *env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    jctx *c = ctx_of(handle);
    if (!c) return 0;
    q4vk_context_destroy(c->ctx); /* may still log (validation at teardown): c stays valid */
    jlong messages = c->messages;
    pthread_mutex_destroy(&c->lock);
    free(c);
    return messages;
}

JNIEXPORT jstring JNICALL Java_org_q4vk_Q4vk_nDeviceName(JNIEnv *env, jclass cls, jlong handle) {
    (void)cls;
    char name[512];
    q4vk_context_device_name(q4ctx(handle), name, sizeof name);
    return utf8_string(env, name);
}

JNIEXPORT jlong JNICALL Java_org_q4vk_Q4vk_nLogCount(JNIEnv *env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    jctx *c = ctx_of(handle);
    if (!c) return 0;
    pthread_mutex_lock(&c->lock);
    jlong n = c->messages;
    pthread_mutex_unlock(&c->lock);
    return n;
}

JNIEXPORT jboolean JNICALL Java_org_q4vk_Q4vk_nValidationOn(JNIEnv *env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    jctx *c = ctx_of(handle);
    return c && c->validation_on ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jstring JNICALL Java_org_q4vk_Q4vk_nLogLast(JNIEnv *env, jclass cls, jlong handle) {
    (void)cls;
    jctx *c = ctx_of(handle);
    if (!c) return NULL;
    char last[sizeof c->last];
    pthread_mutex_lock(&c->lock);
    memcpy(last, c->last, sizeof last);
    jlong n = c->messages;
    pthread_mutex_unlock(&c->lock);
    return n ? utf8_string(env, last) : NULL;
}

JNIEXPORT jbyteArray JNICALL Java_org_q4vk_Q4vk_nPipelineCache(JNIEnv *env, jclass cls, jlong handle) {
    (void)cls;
    q4vk_context *ctx = q4ctx(handle);
    for (int attempt = 0; attempt < 4; attempt++) { /* the blob may grow between the calls */
        size_t size = 0, written = 0;
        q4vk_status st = q4vk_context_pipeline_cache_size(ctx, &size);
        if (st != Q4VK_OK) {
            throw_status(env, st);
            return NULL;
        }
        void *data = malloc(size ? size : 1);
        if (!data) {
            (*env)->ThrowNew(env, g_oom, "q4vk_jni: no memory for the pipeline cache");
            return NULL;
        }
        st = q4vk_context_pipeline_cache_data(ctx, data, size, &written);
        if (st == Q4VK_ERROR_BUFFER_TOO_SMALL) {
            free(data);
            continue;
        }
        if (st != Q4VK_OK) {
            free(data);
            throw_status(env, st);
            return NULL;
        }
        jbyteArray out = (jbyteArray)new_array(env, ELEM_BYTE, data, written);
        free(data);
        return out;
    }
    throw_iae(env, "q4vk_jni: the pipeline cache kept growing during the copy");
    return NULL;
}

/* ------------------------------------------------------------------ matrices */

JNIEXPORT jlong JNICALL Java_org_q4vk_Q4vk_nMatrixCreate(JNIEnv *env, jclass cls, jlong handle, jint source,
                                                         jlong n, jlong k, jint group_size,
                                                         jboolean zero_points, jint dtype,
                                                         jboolean transposed, jint arch, jobject weight,
                                                         jobject scales, jobject zeros) {
    (void)cls;
    int w_elems = source == Q4VK_SOURCE_FLOAT ? weight_elems(dtype) : ELEM_BYTE;
    arg_t w, s, z;
    if (inspect(env, weight, "weight", w_elems, &w) ||
        inspect(env, scales, "scales", weight_elems(dtype), &s) ||
        inspect(env, zeros, "zeros", ELEM_BYTE, &z))
        return 0;
    /* Not critical: quantizing and uploading a large matrix takes long (no GC stall). */
    q4vk_matrix *mat = NULL;
    q4vk_status st = Q4VK_OK;
    int pinned = !pin(env, &w, 0) && !pin(env, &s, 0) && !pin(env, &z, 0);
    if (pinned) {
        q4vk_matrix_desc d;
        q4vk_matrix_desc_default(&d);
        d.source = (q4vk_matrix_source)source;
        d.n = (uint64_t)n;
        d.k = (uint64_t)k;
        d.group_size = group_size;
        d.zero_points = zero_points ? 1u : 0u;
        d.dtype = (q4vk_dtype)dtype;
        d.transposed = transposed ? 1u : 0u;
        d.arch = arch;
        d.weight = w.ptr;
        d.weight_bytes = w.bytes;
        d.scales = s.ptr;
        d.scales_bytes = s.bytes;
        d.zeros = z.ptr;
        d.zeros_bytes = z.bytes;
        st = q4vk_matrix_create(q4ctx(handle), &d, &mat);
    }
    unpin(env, &z, JNI_ABORT);
    unpin(env, &s, JNI_ABORT);
    unpin(env, &w, JNI_ABORT);
    if (!pinned) return 0; /* OutOfMemoryError pending */
    if (st != Q4VK_OK) {
        throw_status(env, st);
        return 0;
    }
    return (jlong)(intptr_t)mat;
}

JNIEXPORT void JNICALL Java_org_q4vk_Q4vk_nMatrixDestroy(JNIEnv *env, jclass cls, jlong mat) {
    (void)env, (void)cls;
    q4vk_matrix_destroy((q4vk_matrix *)(intptr_t)mat);
}

/* ------------------------------------------------------------------ GEMV */

/* y = x · Wᵀ: f32 x through q4vk_gemv, f16 x (f16: binary16 bits) through q4vk_gemv_host. */
static void gemv(JNIEnv *env, jlong handle, jlong mat, arg_t *x, arg_t *y, jint m, int critical, int f16) {
    if (m < 0) {
        throw_iae(env, "m must not be negative");
        return;
    }
    q4vk_status st = Q4VK_OK;
    /* No JNI calls from here until both are released (critical arrays). */
    int ok = !pin(env, x, critical);
    ok = ok && !pin(env, y, critical);
    const q4vk_matrix *w = (const q4vk_matrix *)(intptr_t)mat;
    if (ok && f16) {
        q4vk_gemv_host_args args;
        q4vk_gemv_host_args_default(&args);
        args.flags = Q4VK_GEMV_F16_ACTIVATIONS;
        args.m = (uint32_t)m;
        args.x = x->ptr;
        args.x_bytes = x->bytes;
        args.y = (float *)y->ptr;
        args.y_len = y->bytes / sizeof(float);
        st = q4vk_gemv_host(q4ctx(handle), w, &args);
    } else if (ok) {
        st = q4vk_gemv(q4ctx(handle), w, (const float *)x->ptr, x->bytes / sizeof(float), (float *)y->ptr,
                       y->bytes / sizeof(float), (uint32_t)m);
    }
    unpin(env, y, ok && st == Q4VK_OK ? 0 : JNI_ABORT);
    unpin(env, x, JNI_ABORT);
    if (!ok) return; /* OutOfMemoryError pending */
    if (st != Q4VK_OK) throw_status(env, st);
}

JNIEXPORT void JNICALL Java_org_q4vk_Q4vk_nGemvArrays(JNIEnv *env, jclass cls, jlong handle, jlong mat,
                                                      jfloatArray x, jfloatArray y, jint m) {
    (void)cls;
    arg_t xa, ya;
    if (inspect(env, x, "x", ELEM_FLOAT, &xa) || inspect(env, y, "y", ELEM_FLOAT, &ya)) return;
    gemv(env, handle, mat, &xa, &ya, m, 1, 0);
}

/* f16 activations (short[] of binary16 bits) into float[] y. */
JNIEXPORT void JNICALL Java_org_q4vk_Q4vk_nGemvF16Arrays(JNIEnv *env, jclass cls, jlong handle, jlong mat,
                                                         jshortArray x, jfloatArray y, jint m) {
    (void)cls;
    arg_t xa, ya;
    if (inspect(env, x, "x", ELEM_SHORT, &xa) || inspect(env, y, "y", ELEM_FLOAT, &ya)) return;
    gemv(env, handle, mat, &xa, &ya, m, 1, 1);
}

JNIEXPORT void JNICALL Java_org_q4vk_Q4vk_nGemvBuffers(JNIEnv *env, jclass cls, jlong handle, jlong mat,
                                                       jobject x, jobject y, jint m) {
    (void)cls;
    arg_t xa, ya;
    if (inspect(env, x, "x", 0, &xa) || inspect(env, y, "y", 0, &ya)) return;
    if (((uintptr_t)xa.ptr | (uintptr_t)ya.ptr) % sizeof(float)) {
        throw_iae(env, "x, y: buffer address + position must be 4-byte aligned for f32 data");
        return;
    }
    gemv(env, handle, mat, &xa, &ya, m, 0, 0);
}
