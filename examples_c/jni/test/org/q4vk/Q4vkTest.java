package org.q4vk;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.Arrays;
import java.util.Random;

/**
 * The JNI binding on whatever Vulkan device exists (lavapipe in CI), validation on: GEMV
 * results against an f64 reference of the weights dequantized in Java by the documented
 * Q4 formula, for m = 1..4, from float[]/short[]/direct ByteBuffer weights, Q4 and Paddle
 * sources, with float[] and direct FloatBuffer/ByteBuffer activations; bad input throws
 * the right exception with q4vk's message; any validation message fails. Exits non-zero
 * on any failure (plain main, no JUnit).
 */
public final class Q4vkTest {
    private static int checks, failures;

    private static void check(boolean ok, String what) {
        checks++;
        if (!ok) {
            failures++;
            System.out.println("FAIL " + what);
        }
    }

    // ------------------------------------------------------------- f16 helpers

    static float f16ToF32(short h) {
        int bits = h & 0xffff, sign = (bits >>> 15) != 0 ? -1 : 1, exp = (bits >>> 10) & 0x1f, man = bits & 0x3ff;
        if (exp == 0) return sign * man * 0x1p-24f;
        if (exp == 31) return man == 0 ? sign * Float.POSITIVE_INFINITY : Float.NaN;
        return sign * (1 + man / 1024f) * (float) Math.pow(2, exp - 15);
    }

    /** Round to nearest even (finite inputs within f16 range). */
    static short f32ToF16(float f) {
        int x = Float.floatToRawIntBits(f), sign = (x >>> 16) & 0x8000;
        float a = Math.abs(f);
        if (a >= 65520f) return (short) (sign | 0x7c00);
        if (a < 0x1p-14f) { // subnormal: multiples of 2^-24
            return (short) (sign | (int) Math.rint(a * 0x1p24f));
        }
        int e = Math.getExponent(a); // -14..15
        float m = a / (float) Math.pow(2, e) - 1; // [0, 1)
        int man = (int) Math.rint(m * 1024);
        if (man == 1024) {
            man = 0;
            e++;
        }
        return (short) (sign | ((e + 15) << 10) | man);
    }

    // ------------------------------------------------------------- reference

    /** W[n][k] in f64 from Q4 data: w = (u - z) · s, z = 8 when symmetric. */
    static double[] dequantize(Q4vk.Q4 q) {
        int n = q.n, k = q.k, groups = q.groups(), rowBytes = (k + 1) / 2;
        int g = q.groupSize < 0 ? k : q.groupSize;
        double[] w = new double[n * k];
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < k; c++) {
                int b = q.weight[r * rowBytes + c / 2] & 0xff;
                int u = (c & 1) == 0 ? b & 0xf : b >>> 4;
                int gi = r * groups + c / g;
                double s = f16ToF32(q.scales[gi]);
                int z = q.zeroPoints ? q.zeros[gi] & 0xff : 8;
                w[r * k + c] = (u - z) * s;
            }
        }
        return w;
    }

    static double[] reference(double[] w, int n, int k, float[] x, int m) {
        double[] y = new double[m * n];
        for (int i = 0; i < m; i++)
            for (int r = 0; r < n; r++) {
                double acc = 0;
                for (int c = 0; c < k; c++) acc += (double) x[i * k + c] * w[r * k + c];
                y[i * n + r] = acc;
            }
        return y;
    }

    static double relErr(float[] y, int off, double[] ref) {
        double num = 0, den = 0;
        for (int i = 0; i < ref.length; i++) {
            double v = y[off + i];
            if (!Double.isFinite(v)) return Double.POSITIVE_INFINITY;
            num += (v - ref[i]) * (v - ref[i]);
            den += ref[i] * ref[i];
        }
        return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-300);
    }

    static float[] randn(Random rng, int len) {
        float[] v = new float[len];
        for (int i = 0; i < len; i++) v[i] = (float) rng.nextGaussian();
        return v;
    }

    static ByteBuffer direct(int bytes) {
        return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
    }

    // ------------------------------------------------------------- GEMV through every path

    /** Runs m = 1..4 through float[], FloatBuffer (offset position) and ByteBuffer. */
    static void gemvAllWays(Q4vk.Context ctx, Q4vk.Matrix mat, double[] w, int n, int k, Random rng, String what) {
        for (int m = 1; m <= 4; m++) {
            float[] x = randn(rng, m * k);
            double[] ref = reference(w, n, k, x, m);
            String tag = what + " m=" + m;

            float[] y = new float[m * n + 5]; // longer than needed: only m·n written
            Arrays.fill(y, Float.NaN);
            ctx.gemv(mat, x, y, m);
            double e = relErr(y, 0, ref);
            check(e < 1e-5, tag + " float[]: rel err " + e);
            check(Float.isNaN(y[m * n]), tag + " float[]: nothing written past m·n");

            FloatBuffer xb = direct(4 * (m * k + 3)).asFloatBuffer();
            xb.position(3);
            xb.put(x);
            xb.position(3); // limit stays at capacity = 3 + m·k
            FloatBuffer yb = direct(4 * (m * n + 2)).asFloatBuffer();
            for (int i = 0; i < m * n + 2; i++) yb.put(i, -7f);
            yb.position(1).limit(1 + m * n);
            ctx.gemv(mat, xb, yb, m);
            float[] yv = new float[m * n + 2];
            yb.clear();
            yb.get(yv);
            e = relErr(yv, 1, ref);
            check(e < 1e-5, tag + " FloatBuffer: rel err " + e);
            check(yv[0] == -7f && yv[m * n + 1] == -7f, tag + " FloatBuffer: only position..limit written");
            check(xb.position() == 3, tag + " FloatBuffer: position unchanged");

            ByteBuffer xB = direct(4 * m * k);
            xB.asFloatBuffer().put(x);
            ByteBuffer yB = direct(4 * m * n);
            ctx.gemv(mat, xB, yB, m);
            float[] yw = new float[m * n];
            yB.asFloatBuffer().get(yw);
            e = relErr(yw, 0, ref);
            check(e < 1e-5, tag + " ByteBuffer: rel err " + e);

            // f16 activations: the reference of the values as rounded.
            short[] xh = new short[m * k];
            float[] xr = new float[m * k];
            for (int i = 0; i < m * k; i++) {
                xh[i] = f32ToF16(x[i]);
                xr[i] = f16ToF32(xh[i]);
            }
            float[] yh = new float[m * n];
            Arrays.fill(yh, Float.NaN);
            ctx.gemvF16(mat, xh, yh, m);
            e = relErr(yh, 0, reference(w, n, k, xr, m));
            check(e < 1e-5, tag + " short[] f16 x: rel err " + e);
        }
    }

    static void q4Case(Q4vk.Context ctx, Random rng, int n, int k, int group, boolean zp) {
        String what = "n=" + n + " k=" + k + " g=" + group + (zp ? " zp" : "");
        float[] w = randn(rng, n * k);
        Q4vk.Q4 q = Q4vk.quantizeQ4(w, n, k, group, zp);
        int groups = q.groups();
        check(q.weight.length == n * ((k + 1) / 2), what + ": weight bytes");
        check(q.scales.length == n * groups, what + ": scales");
        check(zp ? q.zeros != null && q.zeros.length == n * groups : q.zeros == null, what + ": zeros");
        double[] deq = dequantize(q);
        double worst = 0;
        int g = group < 0 ? k : group;
        for (int r = 0; r < n; r++)
            for (int c = 0; c < k; c++) {
                double s = f16ToF32(q.scales[r * groups + c / g]);
                worst = Math.max(worst, Math.abs(deq[r * k + c] - w[r * k + c]) / s);
            }
        check(worst <= (zp ? 1.01 : 0.51), what + ": dequantized within the step (" + worst + " steps)");

        try (Q4vk.Matrix fromFloats = ctx.matrix(w, n, k, group, zp);
             Q4vk.Matrix fromQ4 = ctx.matrix(q)) {
            gemvAllWays(ctx, fromFloats, deq, n, k, rng, what + " float[] weights");
            gemvAllWays(ctx, fromQ4, deq, n, k, rng, what + " Q4 source");
        }
        ByteBuffer wb = direct(4 * n * k + 8);
        wb.position(8); // the weight starts after 8 bytes of something else
        wb.asFloatBuffer().put(w);
        try (Q4vk.Matrix fromBuffer = ctx.matrix(wb, Q4vk.DTYPE_F32, n, k, group, zp)) {
            gemvAllWays(ctx, fromBuffer, deq, n, k, rng, what + " ByteBuffer weights");
        }
        short[] wh = new short[n * k];
        for (int i = 0; i < wh.length; i++) wh[i] = f32ToF16(w[i]);
        Q4vk.Q4 qh = Q4vk.quantizeQ4(wh, Q4vk.DTYPE_F16, n, k, group, zp);
        try (Q4vk.Matrix fromHalf = ctx.matrix(wh, Q4vk.DTYPE_F16, n, k, group, zp)) {
            gemvAllWays(ctx, fromHalf, dequantize(qh), n, k, rng, what + " short[] f16 weights");
        }
    }

    /** Paddle int4 of a [k][n] weight built from exact multiples of per-group scales. */
    static void paddleCase(Q4vk.Context ctx, Random rng, int k, int n, int group, boolean f32) {
        String what = "paddle k=" + k + " n=" + n + " g=" + group + (f32 ? " f32" : " f16");
        int g = group < 0 ? k : group, groups = k / g;
        double[] s = new double[groups * n];
        for (int i = 0; i < s.length; i++) s[i] = Math.scalb(1.0, -(2 + rng.nextInt(4)));
        double[] wkn = new double[k * n];
        for (int r = 0; r < k; r++)
            for (int c = 0; c < n; c++) {
                int code = r % g == c % g ? (c % 2 == 0 ? 7 : -7) : rng.nextInt(15) - 7; // every group has |code| 7
                wkn[r * n + c] = code * s[(r / g) * n + c];
            }
        Q4vk.Paddle p;
        if (f32) {
            float[] w = new float[k * n];
            for (int i = 0; i < w.length; i++) w[i] = (float) wkn[i];
            p = Q4vk.weightQuantize(w, k, n, 80, group);
            float[] sc = (float[]) p.scale;
            boolean same = sc.length == s.length;
            for (int i = 0; same && i < s.length; i++) same = sc[i] == (float) s[i];
            check(same, what + ": scale = max|w|/7 exactly");
        } else {
            short[] w = new short[k * n];
            for (int i = 0; i < w.length; i++) w[i] = f32ToF16((float) wkn[i]);
            p = Q4vk.weightQuantize(w, Q4vk.DTYPE_F16, k, n, 80, group);
            short[] sc = (short[]) p.scale;
            boolean same = sc.length == s.length;
            for (int i = 0; same && i < s.length; i++) same = f16ToF32(sc[i]) == (float) s[i];
            check(same, what + ": scale = max|w|/7 exactly");
        }
        check(p.qweight.length == k * n / 2, what + ": qweight bytes");
        double[] wnk = new double[n * k]; // exact: every weight is a code times its scale
        for (int r = 0; r < k; r++)
            for (int c = 0; c < n; c++) wnk[c * k + r] = wkn[r * n + c];
        try (Q4vk.Matrix mat = ctx.matrix(p)) {
            gemvAllWays(ctx, mat, wnk, n, k, rng, what);
        }
    }

    // ------------------------------------------------------------- bad input

    interface Body {
        void run();
    }

    static void expectStatus(int status, String messagePart, String what, Body body) {
        try {
            body.run();
            check(false, what + ": no exception");
        } catch (Q4vkException e) {
            check(e.status() == status, what + ": status " + e.status() + ", expected " + status + " (" + e.getMessage() + ")");
            check(e.detail() != null && e.detail().contains(messagePart),
                    what + ": q4vk's message \"" + e.detail() + "\" names " + messagePart);
            check(e.getMessage().endsWith(e.detail()), what + ": getMessage carries the detail");
            System.out.println("     " + what + " -> " + e.getMessage());
        } catch (RuntimeException e) {
            check(false, what + ": " + e);
        }
    }

    static void expectIae(String messagePart, String what, Body body) {
        try {
            body.run();
            check(false, what + ": no exception");
        } catch (IllegalArgumentException e) {
            check(e.getMessage().contains(messagePart), what + ": message \"" + e.getMessage() + "\"");
            System.out.println("     " + what + " -> IllegalArgumentException: " + e.getMessage());
        } catch (RuntimeException e) {
            check(false, what + ": " + e);
        }
    }

    static void badInput(Q4vk.Context ctx, Random rng) {
        int n = 40, k = 64;
        float[] w = randn(rng, n * k);
        try (Q4vk.Matrix mat = ctx.matrix(w, n, k, 32, false)) {
            float[] x = randn(rng, k), y = new float[n];
            expectStatus(Q4vk.ERROR_NULL_POINTER, "x is NULL", "null x array", () -> ctx.gemv(mat, (float[]) null, y, 1));
            expectStatus(Q4vk.ERROR_NULL_POINTER, "y is NULL", "null y array", () -> ctx.gemv(mat, x, (float[]) null, 1));
            expectStatus(Q4vk.ERROR_NULL_POINTER, "x is NULL", "null x buffer",
                    () -> ctx.gemv(mat, (FloatBuffer) null, direct(4 * n).asFloatBuffer(), 1));
            float[] sentinel = new float[2 * n];
            Arrays.fill(sentinel, 42f);
            expectStatus(Q4vk.ERROR_BUFFER_TOO_SMALL, "x_len", "short x array (m = 2)",
                    () -> ctx.gemv(mat, new float[2 * k - 1], sentinel, 2));
            boolean untouched = true;
            for (float v : sentinel) untouched &= v == 42f;
            check(untouched, "short x array: y not written");
            expectStatus(Q4vk.ERROR_BUFFER_TOO_SMALL, "y_len", "short y array",
                    () -> ctx.gemv(mat, x, new float[n - 1], 1));
            expectStatus(Q4vk.ERROR_BUFFER_TOO_SMALL, "x_bytes", "short f16 x array",
                    () -> ctx.gemvF16(mat, new short[k - 1], y, 1));
            ByteBuffer shortX = direct(4 * k - 4);
            expectStatus(Q4vk.ERROR_BUFFER_TOO_SMALL, "x_len", "short x ByteBuffer",
                    () -> ctx.gemv(mat, shortX, direct(4 * n), 1));
            FloatBuffer limited = direct(4 * n).asFloatBuffer();
            limited.limit(n - 1);
            expectStatus(Q4vk.ERROR_BUFFER_TOO_SMALL, "y_len", "y FloatBuffer limit below n",
                    () -> ctx.gemv(mat, direct(4 * k).asFloatBuffer(), limited, 1));
            expectIae("direct", "heap ByteBuffer x",
                    () -> ctx.gemv(mat, ByteBuffer.allocate(4 * k).order(ByteOrder.nativeOrder()), direct(4 * n), 1));
            expectIae("direct", "heap FloatBuffer y",
                    () -> ctx.gemv(mat, direct(4 * k).asFloatBuffer(), FloatBuffer.wrap(new float[n]), 1));
            ByteOrder other = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN ? ByteOrder.BIG_ENDIAN : ByteOrder.LITTLE_ENDIAN;
            expectIae("byte order", "ByteBuffer in the other byte order",
                    () -> ctx.gemv(mat, ByteBuffer.allocateDirect(4 * k).order(other), direct(4 * n), 1));
            expectIae("read-only", "read-only y",
                    () -> ctx.gemv(mat, direct(4 * k), direct(4 * n).asReadOnlyBuffer().order(ByteOrder.nativeOrder()), 1));
            ByteBuffer odd = direct(4 * k + 4);
            odd.position(2);
            expectIae("aligned", "x at an unaligned position",
                    () -> ctx.gemv(mat, odd, direct(4 * n), 1));
            expectStatus(Q4vk.ERROR_INVALID_ARGUMENT, "m", "m = 0", () -> ctx.gemv(mat, x, y, 0));
            expectStatus(Q4vk.ERROR_BUFFER_TOO_SMALL, "y_len", "m = 9 with y for 8 rows",
                    () -> ctx.gemv(mat, new float[9 * k], new float[8 * n], 9));
            expectStatus(Q4vk.ERROR_NULL_POINTER, "mat is NULL", "null matrix", () -> ctx.gemv(null, x, y, 1));
        }
        Q4vk.Matrix closed = ctx.matrix(w, n, k, 32, false);
        closed.close();
        closed.close(); // idempotent
        expectStatus(Q4vk.ERROR_NULL_POINTER, "mat is NULL", "closed matrix",
                () -> ctx.gemv(closed, new float[k], new float[n], 1));

        // CPU functions.
        expectStatus(Q4vk.ERROR_NULL_POINTER, "weight", "quantizeQ4 null weight",
                () -> Q4vk.quantizeQ4((float[]) null, n, k, 32, false));
        expectStatus(Q4vk.ERROR_BUFFER_TOO_SMALL, "weight", "quantizeQ4 short weight",
                () -> Q4vk.quantizeQ4(new float[n * k - 1], n, k, 32, false));
        float[] nan = w.clone();
        nan[77] = Float.NaN;
        expectStatus(Q4vk.ERROR_NON_FINITE, "", "quantizeQ4 NaN weight", () -> Q4vk.quantizeQ4(nan, n, k, 32, false));
        expectStatus(Q4vk.ERROR_INVALID_ARGUMENT, "group", "quantizeQ4 group 48",
                () -> Q4vk.quantizeQ4(w, n, k, 48, false));
        expectStatus(Q4vk.ERROR_INVALID_ARGUMENT, "", "weightQuantize k = 100 (arch 80)",
                () -> Q4vk.weightQuantize(new short[100 * 16], Q4vk.DTYPE_F16, 100, 16, 80, -1));
        expectIae("wrong array type", "short[] weight declared F32",
                () -> Q4vk.quantizeQ4(new short[n * k], Q4vk.DTYPE_F32, n, k, 32, false));
        expectStatus(Q4vk.ERROR_BUFFER_TOO_SMALL, "weight", "matrix from a short array",
                () -> ctx.matrix(new float[n * k - 1], n, k, 32, false).close());
        expectIae("direct", "matrix from a heap ByteBuffer",
                () -> ctx.matrix(ByteBuffer.allocate(4 * n * k), Q4vk.DTYPE_F32, n, k, 32, false).close());

        // A closed context: q4vk sees NULL and says so.
        Q4vk.Context gone = new Q4vk.Context(Q4vk.CONTEXT_VALIDATION);
        Q4vk.Matrix orphan = gone.matrix(w, n, k, 32, false);
        gone.close();
        gone.close(); // idempotent
        expectStatus(Q4vk.ERROR_NULL_POINTER, "ctx is NULL", "gemv on a closed context",
                () -> gone.gemv(orphan, new float[k], new float[n], 1));
        expectStatus(Q4vk.ERROR_NULL_POINTER, "ctx", "matrix on a closed context",
                () -> gone.matrix(w, n, k, 32, false));
        expectStatus(Q4vk.ERROR_NULL_POINTER, "ctx", "pipelineCache of a closed context", gone::pipelineCache);
        try {
            gone.deviceName();
            check(false, "deviceName of a closed context: no exception");
        } catch (IllegalStateException e) {
            check(true, "");
        }
        orphan.close(); // a matrix may outlive its context
        check(gone.logMessages() == 0, "closed context: no validation message (" + gone.lastLogMessage() + ")");
    }

    public static void main(String[] args) {
        long t0 = System.nanoTime();
        check(Q4vk.version() == Q4vk.headerVersion(), "library version == header version");
        System.out.println("q4vk " + Q4vk.versionString() + " (JNI)");
        Random rng = new Random(20261130L);
        byte[] cache;
        long messages;
        String last;
        try (Q4vk.Context ctx = new Q4vk.Context(Q4vk.CONTEXT_VALIDATION)) {
            System.out.println("device: " + ctx.deviceName());
            check(ctx.validationEnabled(), "the validation layer is enabled (VK_LAYER_KHRONOS_validation installed?)");
            int[][] shapes = {{64, 256, 128, 0}, {37, 300, 64, 1}, {130, 96, -1, 0}, {16, 1001, 32, 1}, {5, 7, 32, 0}};
            for (int[] s : shapes) q4Case(ctx, rng, s[0], s[1], s[2], s[3] != 0);
            paddleCase(ctx, rng, 128, 32, -1, false);
            paddleCase(ctx, rng, 256, 48, 64, true);
            paddleCase(ctx, rng, 256, 16, 128, false);
            System.out.println("bad input:");
            badInput(ctx, rng);
            cache = ctx.pipelineCache();
            check(cache.length >= 32, "pipeline cache blob has at least its header (" + cache.length + " bytes)");
            messages = ctx.logMessages();
            last = ctx.lastLogMessage();
        }
        try (Q4vk.Context again = new Q4vk.Context(Q4vk.CONTEXT_VALIDATION, cache)) {
            float[] w = randn(rng, 24 * 64);
            Q4vk.Q4 q = Q4vk.quantizeQ4(w, 24, 64, 32, false);
            try (Q4vk.Matrix mat = again.matrix(q)) {
                gemvAllWays(again, mat, dequantize(q), 24, 64, rng, "context from the saved pipeline cache");
            }
            messages += again.logMessages();
            if (last == null) last = again.lastLogMessage();
        }
        check(messages == 0, "no validation (or other WARN/ERROR) message: " + messages + (last == null ? "" : ", last: " + last));
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.printf("%s: %d checks, %d failure(s), %.1f s%n", failures == 0 ? "PASSED" : "FAILED", checks, failures, secs);
        System.exit(failures == 0 ? 0 : 1);
    }
}
