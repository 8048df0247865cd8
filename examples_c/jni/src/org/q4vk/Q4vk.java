package org.q4vk;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Java binding of q4vk (int4 weight quantization and a fused int4 GEMV in Vulkan) over
 * its C API, through the JNI shim {@code libq4vk_jni.so}.
 *
 * <p>Every q4vk status other than {@code Q4VK_OK} becomes a {@link Q4vkException} carrying
 * the status and q4vk's message. A null array or buffer is passed to q4vk as NULL (q4vk
 * answers {@code NULL_POINTER} and names the argument); arrays that are too short are
 * q4vk's {@code BUFFER_TOO_SMALL}. Buffers must be direct and in native byte order (else
 * {@link IllegalArgumentException}); their content from {@code position()} to
 * {@code limit()} is used and their position is not changed.
 *
 * <p>Loading: {@code -Dq4vk.jni.library=/path/libq4vk_jni.so} loads that file, otherwise
 * {@code System.loadLibrary("q4vk_jni")} (on Android: put {@code libq4vk.so} and
 * {@code libq4vk_jni.so} in {@code jniLibs/<abi>/}; the shim depends on {@code libq4vk.so}).
 */
public final class Q4vk {
    private Q4vk() {}

    static {
        String path = System.getProperty("q4vk.jni.library");
        if (path != null && !path.isEmpty()) {
            System.load(path);
        } else {
            System.loadLibrary("q4vk_jni");
        }
    }

    // q4vk_status codes.
    public static final int OK = 0;
    public static final int ERROR_INVALID_ARGUMENT = 1;
    public static final int ERROR_NULL_POINTER = 2;
    public static final int ERROR_BUFFER_TOO_SMALL = 3;
    public static final int ERROR_UNSUPPORTED = 4;
    public static final int ERROR_NON_FINITE = 5;
    public static final int ERROR_ABI_MISMATCH = 6;
    public static final int ERROR_OUT_OF_HOST_MEMORY = 7;
    public static final int ERROR_NO_DEVICE = 8;
    public static final int ERROR_VULKAN = 9;
    public static final int ERROR_OUT_OF_DEVICE_MEMORY = 10;
    public static final int ERROR_DEVICE_LOST = 11;
    public static final int ERROR_INTERNAL = 12;

    // q4vk_dtype.
    public static final int DTYPE_F32 = 0;
    public static final int DTYPE_F16 = 1;
    public static final int DTYPE_BF16 = 2;

    // q4vk_matrix_source.
    public static final int SOURCE_FLOAT = 0;
    public static final int SOURCE_Q4 = 1;
    public static final int SOURCE_PADDLE = 2;

    // Context flags.
    public static final int CONTEXT_VALIDATION = 0x1;
    public static final int CONTEXT_PORTABLE_KERNELS = 0x2;

    /** Packed library version (major << 22 | minor << 12 | patch). */
    public static native int version();

    /** The library version, e.g. "0.1.0". */
    public static native String versionString();

    /** The header version the shim was compiled against. */
    public static native int headerVersion();

    // ---------------------------------------------------------------- Q4 (CPU)

    /** q4vk Q4 data: {@code weight} n·ceil(k/2) bytes, f16 {@code scales} [n][groups], {@code zeros} [n][groups] or null. */
    public static final class Q4 {
        public final int n, k, groupSize;
        public final boolean zeroPoints;
        public final byte[] weight;
        public final short[] scales;
        public final byte[] zeros;

        Q4(int n, int k, int groupSize, boolean zeroPoints, Object[] parts) {
            this.n = n;
            this.k = k;
            this.groupSize = groupSize;
            this.zeroPoints = zeroPoints;
            this.weight = (byte[]) parts[0];
            this.scales = (short[]) parts[1];
            this.zeros = (byte[]) parts[2];
        }

        /** Groups per row. */
        public int groups() {
            return groupSize < 0 ? 1 : (k + groupSize - 1) / groupSize;
        }
    }

    /** {@code q4vk_q4_quantize} of an f32 weight [n][k] (nn.Linear layout). */
    public static Q4 quantizeQ4(float[] weight, int n, int k, int groupSize, boolean zeroPoints) {
        return new Q4(n, k, groupSize, zeroPoints,
                nQ4Quantize(weight, DTYPE_F32, n, k, groupSize, zeroPoints));
    }

    /** {@code q4vk_q4_quantize} of an f16 (or bf16, with {@code dtype}) weight [n][k] given as raw 16-bit values. */
    public static Q4 quantizeQ4(short[] weight, int dtype, int n, int k, int groupSize, boolean zeroPoints) {
        return new Q4(n, k, groupSize, zeroPoints,
                nQ4Quantize(weight, dtype, n, k, groupSize, zeroPoints));
    }

    // ---------------------------------------------------------------- Paddle (CPU)

    /** Paddle {@code weight_quantize} output: permuted int4 {@code qweight} and {@code scale} (short[] f16/bf16 bits, or float[] for f32). */
    public static final class Paddle {
        public final int k, n, arch, groupSize, dtype;
        public final byte[] qweight;
        public final Object scale;

        Paddle(int k, int n, int arch, int groupSize, int dtype, Object[] parts) {
            this.k = k;
            this.n = n;
            this.arch = arch;
            this.groupSize = groupSize;
            this.dtype = dtype;
            this.qweight = (byte[]) parts[0];
            this.scale = parts[1];
        }
    }

    /** {@code q4vk_weight_quantize} (int4) of a [k][n] f16/bf16 weight (raw 16-bit values). */
    public static Paddle weightQuantize(short[] weight, int dtype, int k, int n, int arch, int groupSize) {
        return new Paddle(k, n, arch, groupSize, dtype, nWeightQuantize(weight, dtype, k, n, arch, groupSize));
    }

    /** {@code q4vk_weight_quantize} (int4) of a [k][n] f32 weight (q4vk's f32 extension: f32 scale). */
    public static Paddle weightQuantize(float[] weight, int k, int n, int arch, int groupSize) {
        return new Paddle(k, n, arch, groupSize, DTYPE_F32, nWeightQuantize(weight, DTYPE_F32, k, n, arch, groupSize));
    }

    // ---------------------------------------------------------------- Vulkan

    /** A q4vk context (own Vulkan instance and device). Not to be closed while another thread uses it. */
    public static final class Context implements AutoCloseable {
        private final AtomicLong handle = new AtomicLong();
        private long finalMessages;

        public Context(int flags) {
            this(flags, null);
        }

        /** @param pipelineCache a blob from {@link #pipelineCache()} of an earlier run, or null. */
        public Context(int flags, byte[] pipelineCache) {
            handle.set(nContextCreate(flags, pipelineCache));
        }

        long handle() {
            return handle.get();
        }

        public String deviceName() {
            long h = handle.get();
            if (h == 0) throw new IllegalStateException("context is closed");
            return nDeviceName(h);
        }

        /** Log messages at WARN or ERROR received so far (validation messages included), also after close. */
        public long logMessages() {
            long h = handle.get();
            return h == 0 ? finalMessages : nLogCount(h);
        }

        /** Whether q4vk enabled the Khronos validation layer for this context (CONTEXT_VALIDATION and the layer installed). */
        public boolean validationEnabled() {
            return nValidationOn(handle.get());
        }

        /** The last such message, or null. */
        public String lastLogMessage() {
            long h = handle.get();
            return h == 0 ? null : nLogLast(h);
        }

        /** The pipeline-cache blob (save it, pass it to the next context). */
        public byte[] pipelineCache() {
            return nPipelineCache(handle.get());
        }

        /** FLOAT source: f32 weight [n][k], quantized by q4vk (f16 scales). */
        public Matrix matrix(float[] weight, int n, int k, int groupSize, boolean zeroPoints) {
            return new Matrix(nMatrixCreate(handle.get(), SOURCE_FLOAT, n, k, groupSize, zeroPoints, DTYPE_F32,
                    false, 80, weight, null, null), n, k);
        }

        /** FLOAT source: f16/bf16 weight [n][k] as raw 16-bit values. */
        public Matrix matrix(short[] weight, int dtype, int n, int k, int groupSize, boolean zeroPoints) {
            return new Matrix(nMatrixCreate(handle.get(), SOURCE_FLOAT, n, k, groupSize, zeroPoints, dtype,
                    false, 80, weight, null, null), n, k);
        }

        /** FLOAT source from a direct buffer of {@code dtype} elements [n][k] (position..limit). */
        public Matrix matrix(ByteBuffer weight, int dtype, int n, int k, int groupSize, boolean zeroPoints) {
            checkBuffer(weight, "weight", false);
            return new Matrix(nMatrixCreate(handle.get(), SOURCE_FLOAT, n, k, groupSize, zeroPoints, dtype,
                    false, 80, weight, null, null), n, k);
        }

        /** Q4 source: data from {@link Q4vk#quantizeQ4}. */
        public Matrix matrix(Q4 q) {
            return new Matrix(nMatrixCreate(handle.get(), SOURCE_Q4, q.n, q.k, q.groupSize, q.zeroPoints, DTYPE_F16,
                    false, 80, q.weight, q.scales, q.zeros), q.n, q.k);
        }

        /** PADDLE source: data from {@link Q4vk#weightQuantize}. */
        public Matrix matrix(Paddle p) {
            return new Matrix(nMatrixCreate(handle.get(), SOURCE_PADDLE, p.n, p.k, p.groupSize, false, p.dtype,
                    false, p.arch, p.qweight, p.scale, null), p.n, p.k);
        }

        /** y[m][n] = x[m][k] · Wᵀ, synchronous. */
        public void gemv(Matrix w, float[] x, float[] y, int m) {
            nGemvArrays(handle.get(), w == null ? 0 : w.handle.get(), x, y, m);
        }

        /** y[m][n] = x[m][k] · Wᵀ with f16 activations (IEEE binary16 bit patterns), synchronous. */
        public void gemvF16(Matrix w, short[] x, float[] y, int m) {
            nGemvF16Arrays(handle.get(), w == null ? 0 : w.handle.get(), x, y, m);
        }

        /** As {@link #gemv(Matrix, float[], float[], int)} with direct buffers (position..limit). */
        public void gemv(Matrix w, FloatBuffer x, FloatBuffer y, int m) {
            checkBuffer(x, "x", false);
            checkBuffer(y, "y", true);
            nGemvBuffers(handle.get(), w == null ? 0 : w.handle.get(), x, y, m);
        }

        /** As above with direct native-order byte buffers holding f32 values. */
        public void gemv(Matrix w, ByteBuffer x, ByteBuffer y, int m) {
            checkBuffer(x, "x", false);
            checkBuffer(y, "y", true);
            nGemvBuffers(handle.get(), w == null ? 0 : w.handle.get(), x, y, m);
        }

        @Override
        public void close() {
            long h = handle.getAndSet(0);
            if (h != 0) finalMessages = nContextDestroy(h);
        }
    }

    /** A GPU matrix. Independent of its context's lifetime (q4vk keeps the device alive). */
    public static final class Matrix implements AutoCloseable {
        private final AtomicLong handle = new AtomicLong();
        public final int n, k;

        Matrix(long h, int n, int k) {
            handle.set(h);
            this.n = n;
            this.k = k;
        }

        @Override
        public void close() {
            long h = handle.getAndSet(0);
            if (h != 0) nMatrixDestroy(h);
        }
    }

    private static void checkBuffer(Buffer b, String name, boolean writable) {
        if (b == null) return; // q4vk reports NULL_POINTER
        if (!b.isDirect()) {
            throw new IllegalArgumentException(name + ": a direct buffer is needed (ByteBuffer.allocateDirect)");
        }
        ByteOrder order = b instanceof ByteBuffer ? ((ByteBuffer) b).order()
                : b instanceof FloatBuffer ? ((FloatBuffer) b).order() : ByteOrder.nativeOrder();
        if (order != ByteOrder.nativeOrder()) {
            throw new IllegalArgumentException(name + ": the buffer must be in native byte order (order(ByteOrder.nativeOrder()))");
        }
        if (writable && b.isReadOnly()) {
            throw new IllegalArgumentException(name + ": the buffer is read-only");
        }
    }

    private static native Object[] nQ4Quantize(Object weight, int dtype, long n, long k, int groupSize, boolean zeroPoints);
    private static native Object[] nWeightQuantize(Object weight, int dtype, long k, long n, int arch, int groupSize);
    private static native long nContextCreate(int flags, byte[] pipelineCache);
    private static native long nContextDestroy(long ctx);
    private static native String nDeviceName(long ctx);
    private static native long nLogCount(long ctx);
    private static native String nLogLast(long ctx);
    private static native boolean nValidationOn(long ctx);
    private static native byte[] nPipelineCache(long ctx);
    private static native long nMatrixCreate(long ctx, int source, long n, long k, int groupSize, boolean zeroPoints,
            int dtype, boolean transposed, int arch, Object weight, Object scales, Object zeros);
    private static native void nMatrixDestroy(long mat);
    private static native void nGemvArrays(long ctx, long mat, float[] x, float[] y, int m);
    private static native void nGemvBuffers(long ctx, long mat, Buffer x, Buffer y, int m);
    private static native void nGemvF16Arrays(long ctx, long mat, short[] x, float[] y, int m);
}
