package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.cuda.Cublas.DataType;
import dev.taco.kernels.cuda.CublasLt.Epilogue;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link Cublas} and {@link CublasLt} on a real GPU (skipped with the reason where there is none, or no libcublas):
 * row-major results against a float64 reference computed here from the same (bf16-exact where bf16) inputs, for every
 * transpose pair, with element offsets and padded leading dimensions; strided batched products of attention's shapes;
 * the cuBLASLt BIAS and GELU_BIAS epilogues; which GELU cuBLASLt computes; and a 4096³ bf16 GEMM timed with CUDA
 * events (printed, not asserted: a benchmark, not a timed test).
 *
 * <p>Bounds, with {@code mag = Σ_p |op(A)_ip|·|op(B)_pj|} (+ |C| when accumulating, + |bias|):
 * <ul>
 *   <li>fp32 in, fp32 out (TF32 off): {@code |got − ref| ≤ 1e-5·mag}, i.e. within 1e-5 relative of the float64
 *       reference, measured against the magnitude of the terms (an elementwise relative error is unbounded under
 *       cancellation);
 *   <li>bf16 in: {@code |got − ref| ≤ 2^-14·mag} for the fp32 accumulation on tensor cores, plus {@code 2^-8·|ref|}
 *       (half a bf16 ulp, the final rounding) when the output is bf16.
 * </ul>
 * Inputs are seeded from {@code -Dtaco.seed} (default 20261201), printed.
 */
@Tag("gpu")
class CublasGpuTest {
  static final long SEED = Long.getLong("taco.seed", 20261201L);
  static final double FP32_BOUND = 1e-5;
  static final double BF16_ACC_BOUND = Math.scalb(1.0, -14);
  static final double BF16_OUT_BOUND = Math.scalb(1.0, -8);

  private static CudaContext ctx;
  private static CudaStream stream;
  private static DeviceBuffer workspace;
  private static Cublas blas;
  private static CublasLt lt;

  @BeforeAll
  static void open() {
    if (Cuda.available() && Cublas.available()) {
      ctx = CudaContext.open(0);
      stream = ctx.createStream();
      workspace = ctx.alloc(Cublas.WORKSPACE_BYTES);
      blas = Cublas.create(ctx, workspace);
      if (CublasLt.available()) lt = CublasLt.create(ctx, workspace); // same stream: sharing the workspace is safe
      System.out.println("cuBLAS " + Cublas.version() + ", " + CublasLt.unavailableReason() + ", " + ctx + ", seed "
          + SEED);
    }
  }

  @AfterAll
  static void close() {
    if (lt != null) lt.close();
    if (blas != null) blas.close();
    if (workspace != null) workspace.close();
    if (stream != null) stream.close();
    if (ctx != null) ctx.close();
  }

  static void assumeGpu() {
    assumeTrue(Cublas.available() && Cuda.available(), Cuda.unavailableReason() + "; " + Cublas.unavailableReason());
  }

  // ------------------------------------------------------------------ data and references

  static float[] random(Random r, int n, boolean bf16) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      float x = (float) r.nextGaussian();
      v[i] = bf16 ? Bf16.decode(Bf16.encode(x)) : x;
    }
    return v;
  }

  /** {@code v} on this test's device as {@code t} ({@link CublasMockScenarios#upload}). */
  static DeviceBuffer upload(float[] v, DataType t) {
    return CublasMockScenarios.upload(ctx, v, t);
  }

  /** {@code n} elements of {@code d} back as floats, after the stream ({@link CublasMockScenarios#download}). */
  static float[] download(DeviceBuffer d, int n, DataType t) {
    stream.synchronize();
    return CublasMockScenarios.download(d, n, t);
  }

  /** Row-major {@code op(A)·op(B)} in float64 and its magnitude Σ|a||b|, element (i,j) at {@code i*n + j}. */
  static double[][] reference(boolean ta, boolean tb, int m, int n, int k, float[] a, int aOff, int lda, float[] b,
      int bOff, int ldb) {
    double[] ref = new double[m * n], mag = new double[m * n];
    for (int i = 0; i < m; i++) {
      for (int j = 0; j < n; j++) {
        double s = 0, g = 0;
        for (int p = 0; p < k; p++) {
          double x = a[aOff + (ta ? p * lda + i : i * lda + p)];
          double y = b[bOff + (tb ? j * ldb + p : p * ldb + j)];
          s += x * y;
          g += Math.abs(x * y);
        }
        ref[i * n + j] = s;
        mag[i * n + j] = g;
      }
    }
    return new double[][] {ref, mag};
  }

  /** Asserts the bound of the class comment on every element; returns the worst |err| / mag seen. */
  static double check(String what, float[] got, int cOff, int ldc, int m, int n, double[] ref, double[] mag,
      DataType in, DataType out) {
    double worst = 0;
    for (int i = 0; i < m; i++) {
      for (int j = 0; j < n; j++) {
        double g = got[cOff + i * ldc + j], want = ref[i * n + j], err = Math.abs(g - want);
        double bound = in == DataType.F32 ? FP32_BOUND * mag[i * n + j]
            : BF16_ACC_BOUND * mag[i * n + j] + (out == DataType.BF16 ? BF16_OUT_BOUND * Math.abs(want) : 0);
        assertThat(err).as("%s (%d,%d): got %s, float64 %s, seed %d", what, i, j, g, want, SEED)
            .isLessThanOrEqualTo(bound);
        if (mag[i * n + j] > 0) worst = Math.max(worst, err / mag[i * n + j]);
      }
    }
    return worst;
  }

  // ------------------------------------------------------------------ GEMM

  private static void everyTranspose(DataType in, DataType out) {
    Random r = new Random(SEED);
    int m = 67, n = 45, k = 513;
    for (boolean ta : new boolean[] {false, true}) {
      for (boolean tb : new boolean[] {false, true}) {
        for (boolean acc : new boolean[] {false, true}) {
          int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7, aOff = 11, bOff = 13, cOff = 17;
          float[] a = random(r, aOff + (ta ? k : m) * lda, in == DataType.BF16);
          float[] b = random(r, bOff + (tb ? n : k) * ldb, in == DataType.BF16);
          float[] c = random(r, cOff + m * ldc, out == DataType.BF16);
          double[][] rm = reference(ta, tb, m, n, k, a, aOff, lda, b, bOff, ldb);
          if (acc) {
            for (int i = 0; i < m; i++) {
              for (int j = 0; j < n; j++) {
                rm[0][i * n + j] += c[cOff + i * ldc + j];
                rm[1][i * n + j] += Math.abs(c[cOff + i * ldc + j]);
              }
            }
          }
          try (DeviceBuffer da = upload(a, in); DeviceBuffer db = upload(b, in); DeviceBuffer dc = upload(c, out)) {
            blas.gemm(stream, ta, tb, m, n, k, in, out, da, aOff, lda, db, bOff, ldb, dc, cOff, ldc, acc);
            float[] got = download(dc, c.length, out);
            String what = in + "->" + out + " transA=" + ta + " transB=" + tb + " accumulate=" + acc;
            double worst = check(what, got, cOff, ldc, m, n, rm[0], rm[1], in, out);
            for (int i = 0; i < m; i++) { // the padding of C is untouched
              for (int j = n; j < ldc && cOff + i * ldc + j < c.length; j++) {
                assertThat(got[cOff + i * ldc + j]).as("%s padding (%d,%d)", what, i, j)
                    .isEqualTo(c[cOff + i * ldc + j]);
              }
            }
            System.out.printf(Locale.ROOT, "%-50s max |err|/mag = %.2e%n", what, worst);
          }
        }
      }
    }
  }

  @Test
  void fp32EveryTransposeWithin1e5OfFloat64() {
    assumeGpu();
    everyTranspose(DataType.F32, DataType.F32);
  }

  @Test
  void bf16InFp32OutEveryTranspose() {
    assumeGpu();
    everyTranspose(DataType.BF16, DataType.F32);
  }

  @Test
  void bf16InBf16OutEveryTranspose() {
    assumeGpu();
    everyTranspose(DataType.BF16, DataType.BF16);
  }

  /** Attention's per-head products: S = Q·Kᵀ/√d over B·H heads, then O = P·V, fp32 and bf16. */
  @Test
  void stridedBatchedAttentionShapes() {
    assumeGpu();
    int heads = 8, t = 128, d = 64;
    float scale = (float) (1 / Math.sqrt(d));
    for (DataType in : new DataType[] {DataType.F32, DataType.BF16}) {
      DataType out = in;
      Random r = new Random(SEED + 1);
      boolean bf = in == DataType.BF16;
      float[] q = random(r, heads * t * d, bf), kk = random(r, heads * t * d, bf), v = random(r, heads * t * d, bf);
      try (DeviceBuffer dq = upload(q, in); DeviceBuffer dk = upload(kk, in); DeviceBuffer dv = upload(v, in);
          DeviceBuffer ds = ctx.alloc((long) heads * t * t * out.bytes);
          DeviceBuffer dout = ctx.alloc((long) heads * t * d * out.bytes)) {
        blas.gemmStridedBatched(stream, false, true, t, t, d, in, out, scale, dq, 0, d, (long) t * d, dk, 0, d,
            (long) t * d, 0f, ds, 0, t, (long) t * t, heads);
        float[] s = download(ds, heads * t * t, out);
        double worstS = 0;
        for (int h = 0; h < heads; h++) {
          double[][] rm = reference(false, true, t, t, d, q, h * t * d, d, kk, h * t * d, d);
          for (int i = 0; i < rm[0].length; i++) {
            rm[0][i] *= scale;
            rm[1][i] *= scale;
          }
          worstS = Math.max(worstS, check(in + " S=Q·Kᵀ/√d head " + h, s, h * t * t, t, t, t, rm[0], rm[1], in, out));
        }
        // P·V with the scores as P (exact inputs: what the device holds)
        blas.gemmStridedBatched(stream, false, false, t, d, t, in, out, 1f, ds, 0, t, (long) t * t, dv, 0, d,
            (long) t * d, 0f, dout, 0, d, (long) t * d, heads);
        float[] o = download(dout, heads * t * d, out);
        double worstO = 0;
        for (int h = 0; h < heads; h++) {
          double[][] rm = reference(false, false, t, d, t, s, h * t * t, t, v, h * t * d, d);
          worstO = Math.max(worstO, check(in + " O=P·V head " + h, o, h * t * d, d, t, d, rm[0], rm[1], in, out));
        }
        System.out.printf(Locale.ROOT, "strided batched %s (%d heads, T=%d, d=%d): max |err|/mag S %.2e, O %.2e%n",
            in, heads, t, d, worstS, worstO);
      }
    }
  }

  // ------------------------------------------------------------------ cuBLASLt

  static double geluTanh(double x) {
    return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
  }

  static double geluErf(double x) {
    return 0.5 * x * (1 + erf(x / Math.sqrt(2)));
  }

  /** erf by Abramowitz and Stegun 7.1.26 (|error| ≤ 1.5e-7): far below the 4.7e-4 between the two GELUs. */
  static double erf(double x) {
    double t = 1 / (1 + 0.3275911 * Math.abs(x));
    double y = 1 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        * Math.exp(-x * x);
    return x < 0 ? -y : y;
  }

  static void assumeLt() {
    assumeGpu();
    assumeTrue(lt != null, CublasLt.unavailableReason());
  }

  /**
   * BIAS and GELU_BIAS, every transpose pair, bf16 and fp32 out, against the float64 product plus the bias per
   * column, then GELU in the tanh form of {@code runtime/layers/Gelu}. The bound adds 5e-4·max(1, |pre|) for GELU, so
   * this test passes for either GELU form; {@link #cublasLtGeluIsTheTanhForm} tells them apart.
   */
  static final int A_OFF = 8, B_OFF = 24, BIAS_OFF = 8, C_OFF = 8;

  @Test
  void cublasLtEpiloguesAgainstCpuReference() {
    assumeLt();
    int m = 96, n = 160, k = 256;
    Random r = new Random(SEED + 2);
    // element offsets that keep 16-byte alignment (the heuristic is told the real alignment, but misaligned bf16
    // operands may have no epilogue kernel at all)
    for (Epilogue e : new Epilogue[] {Epilogue.BIAS, Epilogue.GELU_BIAS}) { // the aux ones: the next test
      for (DataType out : new DataType[] {DataType.BF16, DataType.F32}) {
        for (boolean ta : new boolean[] {false, true}) {
          for (boolean tb : new boolean[] {false, true}) {
            float[] a = random(r, A_OFF + m * k, true), b = random(r, B_OFF + k * n, true);
            float[] bias = random(r, BIAS_OFF + n, out == DataType.BF16);
            double[][] rm = reference(ta, tb, m, n, k, a, A_OFF, ta ? m : k, b, B_OFF, tb ? k : n);
            try (DeviceBuffer da = upload(a, DataType.BF16); DeviceBuffer db = upload(b, DataType.BF16);
                DeviceBuffer dbias = upload(bias, out);
                DeviceBuffer dc = ctx.alloc(((long) C_OFF + m * n) * out.bytes)) {
              lt.matmul(stream, e, ta, tb, m, n, k, da, A_OFF, db, B_OFF, dbias, BIAS_OFF, out, dc, C_OFF);
              float[] got = download(dc, C_OFF + m * n, out);
              double worst = 0;
              String what = "cuBLASLt " + e + " ->" + out + " transA=" + ta + " transB=" + tb;
              for (int i = 0; i < m; i++) {
                for (int j = 0; j < n; j++) {
                  double pre = rm[0][i * n + j] + bias[BIAS_OFF + j],
                      mag = rm[1][i * n + j] + Math.abs(bias[BIAS_OFF + j]);
                  double want = e == Epilogue.GELU_BIAS ? geluTanh(pre) : pre;
                  // GELU's slope is at most 1.13, so the product's error passes through at most 1.13x
                  double bound = 1.13 * BF16_ACC_BOUND * mag + (out == DataType.BF16 ? BF16_OUT_BOUND * Math.abs(want)
                      : 0) + (e == Epilogue.GELU_BIAS ? 5e-4 * Math.max(1, Math.abs(pre)) : 0);
                  double err = Math.abs(got[C_OFF + i * n + j] - want);
                  assertThat(err).as("%s (%d,%d): pre-activation %s, got %s, want %s, seed %d", what, i, j, pre,
                      got[C_OFF + i * n + j], want, SEED).isLessThanOrEqualTo(bound);
                  worst = Math.max(worst, err / Math.max(mag, 1e-30));
                }
              }
              System.out.printf(Locale.ROOT, "%-58s max |err|/mag = %.2e%n", what, worst);
            }
          }
        }
      }
    }
    System.out.println("cuBLASLt plans cached: " + lt.cachedPlans());
  }

  /**
   * The GELU epilogues with an aux matrix, as the GPU backend's MLP uses them (bf16 in, fp32 out): GELU_AUX_BIAS writes
   * {@code aux = A·B + bias} and {@code C = gelu(aux)}; DGELU, given that aux, writes {@code C = (A·B) ⊙ gelu'(aux)}
   * with B transposed (the backward's {@code dout · Wᵀ}); both against float64 references, within the accumulation
   * bound plus the library's GELU error; an n not divisible by 8 is refused before anything runs.
   */
  @Test
  void cublasLtGeluAuxAndDgeluAgainstCpuReference() {
    assumeLt();
    int m = 96, n = 160, k = 256;
    Random r = new Random(SEED + 5);
    float[] a = random(r, A_OFF + m * k, true), b = random(r, B_OFF + k * n, true);
    float[] bias = random(r, BIAS_OFF + n, false);
    double[][] fwd = reference(false, false, m, n, k, a, A_OFF, k, b, B_OFF, n);
    double[][] bwd = reference(false, true, m, n, k, a, A_OFF, k, b, B_OFF, k);
    try (DeviceBuffer da = upload(a, DataType.BF16); DeviceBuffer db = upload(b, DataType.BF16);
        DeviceBuffer dbias = upload(bias, DataType.F32); DeviceBuffer aux = ctx.alloc(4L * (C_OFF + m * n));
        DeviceBuffer dc = ctx.alloc(4L * (C_OFF + m * n)); DeviceBuffer dg = ctx.alloc(4L * (C_OFF + m * n))) {
      lt.matmul(stream, Epilogue.GELU_AUX_BIAS, false, false, m, n, k, da, A_OFF, db, B_OFF, dbias, BIAS_OFF, aux,
          C_OFF, DataType.F32, dc, C_OFF);
      lt.matmul(stream, Epilogue.DGELU, false, true, m, n, k, da, A_OFF, db, B_OFF, null, 0, aux, C_OFF, DataType.F32,
          dg, C_OFF);
      float[] pre = download(aux, C_OFF + m * n, DataType.F32), out = download(dc, C_OFF + m * n, DataType.F32);
      float[] grad = download(dg, C_OFF + m * n, DataType.F32);
      double worstF = 0, worstB = 0;
      for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
          int at = C_OFF + i * n + j;
          double want = fwd[0][i * n + j] + bias[BIAS_OFF + j], mag = fwd[1][i * n + j] + Math.abs(bias[BIAS_OFF + j]);
          assertThat(Math.abs(pre[at] - want)).as("GELU_AUX_BIAS aux (%d,%d), seed %d", i, j, SEED)
              .isLessThanOrEqualTo(BF16_ACC_BOUND * mag);
          double g = geluTanh(pre[at]);
          assertThat(Math.abs(out[at] - g)).as("GELU_AUX_BIAS out (%d,%d)", i, j)
              .isLessThanOrEqualTo(5e-4 * Math.max(1, Math.abs(pre[at])));
          double dg1 = geluTanhSlope(pre[at]), prod = bwd[0][i * n + j];
          double bound = 1.13 * BF16_ACC_BOUND * bwd[1][i * n + j] + 1e-3 * Math.abs(prod) + 1e-6;
          assertThat(Math.abs(grad[at] - prod * dg1)).as("DGELU (%d,%d): product %s, slope %s, got %s, seed %d", i, j,
              prod, dg1, grad[at], SEED).isLessThanOrEqualTo(bound);
          assertThat(Float.isFinite(grad[at]) && Float.isFinite(out[at])).isTrue();
          worstF = Math.max(worstF, Math.abs(out[at] - g) / Math.max(1, Math.abs(pre[at])));
          worstB = Math.max(worstB, Math.abs(grad[at] - prod * dg1) / Math.max(1e-30, bwd[1][i * n + j]));
        }
      }
      System.out.printf(Locale.ROOT, "cuBLASLt GELU_AUX_BIAS max |err| %.2e, DGELU max |err|/mag %.2e%n", worstF,
          worstB);
      assertThatThrownBy(() -> lt.matmul(stream, Epilogue.DGELU, false, true, m, 12, k, da, A_OFF, db, B_OFF, null, 0,
          aux, C_OFF, DataType.F32, dg, C_OFF)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("divisible by 8");
      assertThatThrownBy(() -> lt.matmul(stream, Epilogue.DGELU, false, true, m, n, k, da, A_OFF, db, B_OFF, dbias,
          BIAS_OFF, aux, C_OFF, DataType.F32, dg, C_OFF)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("no bias");
    }
  }

  /** d/dx of the tanh-form GELU. */
  static double geluTanhSlope(double x) {
    double c = Math.sqrt(2 / Math.PI), u = c * (x + 0.044715 * x * x * x), th = Math.tanh(u);
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * c * (1 + 3 * 0.044715 * x * x);
  }

  /**
   * Which GELU the GELU_BIAS epilogue computes: pre-activations set exactly to a grid on [-6, 6] (k = 8, one non-zero
   * product per output, bias 0, fp32 output so nothing is rounded to bf16), compared with the tanh form (what
   * {@code runtime/layers/Gelu} and GPT-2 use) and the erf form. Over the points where the two forms differ by more
   * than 1e-4, the RMS deviation from the right one is the library's own arithmetic error; from the wrong one it is
   * about the forms' difference (up to 4.7e-4, at |x| ≈ 2.7). Fails, saying so, if the epilogue is the erf form.
   */
  @Test
  void cublasLtGeluIsTheTanhForm() {
    assumeLt();
    int m = 1024, n = 8, k = 8;
    float[] x = new float[m];
    float[] a = new float[m * k], b = new float[k * n], bias = new float[n];
    for (int i = 0; i < m; i++) {
      x[i] = Bf16.decode(Bf16.encode(-6f + 12f * i / (m - 1)));
      a[i * k] = x[i];
    }
    for (int j = 0; j < n; j++) b[j] = 1f;
    try (DeviceBuffer da = upload(a, DataType.BF16); DeviceBuffer db = upload(b, DataType.BF16);
        DeviceBuffer dbias = upload(bias, DataType.F32); DeviceBuffer dc = ctx.alloc(4L * m * n)) {
      lt.matmul(stream, Epilogue.GELU_BIAS, false, false, m, n, k, da, 0, db, 0, dbias, 0, DataType.F32, dc, 0);
      float[] got = download(dc, m * n, DataType.F32);
      double maxTanh = 0, maxErf = 0, ssTanh = 0, ssErf = 0;
      int count = 0;
      for (int i = 0; i < m; i++) {
        double t = geluTanh(x[i]), e = geluErf(x[i]);
        for (int j = 0; j < n; j++) {
          double g = got[i * n + j];
          maxTanh = Math.max(maxTanh, Math.abs(g - t));
          maxErf = Math.max(maxErf, Math.abs(g - e));
          if (Math.abs(t - e) > 1e-4) {
            ssTanh += (g - t) * (g - t);
            ssErf += (g - e) * (g - e);
            count++;
          }
        }
      }
      double rmsTanh = Math.sqrt(ssTanh / count), rmsErf = Math.sqrt(ssErf / count);
      String verdict = String.format(Locale.ROOT, "cuBLASLt GELU_BIAS on [-6, 6]: max |lt - gelu_tanh| = %.2e, "
          + "max |lt - gelu_erf| = %.2e; where the forms differ by > 1e-4 (%d points): RMS to tanh %.2e, to erf %.2e "
          + "-> the %s form", maxTanh, maxErf, count, rmsTanh, rmsErf, rmsTanh < rmsErf ? "tanh" : "erf");
      System.out.println(verdict);
      assertThat(rmsTanh).as("the epilogue should be the tanh GELU of runtime/layers/Gelu, but: " + verdict)
          .isLessThan(rmsErf);
    }
  }

  // ------------------------------------------------------------------ speed

  /** Median device time of {@code runs} calls of {@code work}, each between two events, with a spin ahead of all. */
  static double medianMillis(int runs, Runnable work) {
    for (int i = 0; i < 3; i++) work.run(); // warm-up (algorithm choice, module loads)
    stream.synchronize();
    List<CudaEvent> events = new ArrayList<>();
    try {
      for (int i = 0; i < 2 * runs; i++) events.add(ctx.createEvent());
      try {
        new SpinKernel(ctx).enqueue(stream, 20_000_000L); // the host enqueues everything below meanwhile
      } catch (RuntimeException | LinkageError e) {
        System.out.println("no spin ahead of the timed calls (" + e.getMessage() + "): times may include launch gaps");
      }
      for (int i = 0; i < runs; i++) {
        events.get(2 * i).record(stream);
        work.run();
        events.get(2 * i + 1).record(stream);
      }
      stream.synchronize();
      double[] ms = new double[runs];
      for (int i = 0; i < runs; i++) ms[i] = events.get(2 * i).elapsedMillisTo(events.get(2 * i + 1));
      Arrays.sort(ms);
      return runs % 2 == 1 ? ms[runs / 2] : (ms[runs / 2 - 1] + ms[runs / 2]) / 2;
    } finally {
      events.forEach(CudaEvent::close);
    }
  }

  /**
   * A 4096³ bf16 GEMM (bf16 out, fp32 accumulation), median of 20 by CUDA events, as TFLOP/s (docs/design.md §7 quotes
   * 366–713 through PyTorch on this GPU); {@code C = A·B}, {@code C = A·Bᵀ} (the linear layer) and cuBLASLt's
   * {@code gelu(A·Bᵀ + bias)}. 64 sampled elements are checked against float64.
   */
  @Test
  void bf16Gemm4096TflopsByEvents() {
    assumeGpu();
    int s = 4096;
    Random r = new Random(SEED + 3);
    float[] a = new float[s * s], b = new float[s * s], bias = new float[s];
    for (int i = 0; i < a.length; i++) {
      a[i] = Bf16.decode(Bf16.encode(r.nextFloat() * 2 - 1));
      b[i] = Bf16.decode(Bf16.encode(r.nextFloat() * 2 - 1));
    }
    for (int j = 0; j < s; j++) bias[j] = Bf16.decode(Bf16.encode(r.nextFloat() - 0.5f));
    double flops = 2.0 * s * s * s;
    DataType h = DataType.BF16;
    try (DeviceBuffer da = upload(a, h); DeviceBuffer db = upload(b, h); DeviceBuffer dbias = upload(bias, h);
        DeviceBuffer dc = ctx.alloc(2L * s * s)) {
      double nn = medianMillis(20, () -> blas.matmul(stream, h, h, da, 0, db, 0, dc, 0, s, s, s, false));
      float[] c = download(dc, s * s, h);
      for (int q = 0; q < 64; q++) {
        int i = r.nextInt(s), j = r.nextInt(s);
        double ref = 0, mag = 0;
        for (int p = 0; p < s; p++) {
          ref += (double) a[i * s + p] * b[p * s + j];
          mag += Math.abs((double) a[i * s + p] * b[p * s + j]);
        }
        assertThat(Math.abs(c[i * s + j] - ref)).as("4096^3 C(%d,%d), seed %d", i, j, SEED)
            .isLessThanOrEqualTo(BF16_ACC_BOUND * mag + BF16_OUT_BOUND * Math.abs(ref));
      }
      double nt = medianMillis(20, () -> blas.matmulTransB(stream, h, h, da, 0, db, 0, dc, 0, s, s, s, false));
      System.out.printf(Locale.ROOT,
          "cuBLAS bf16 GEMM 4096^3 C=A·B : median %.3f ms = %.0f TFLOP/s (20 runs, events)%n",
          nn, flops / (nn * 1e-3) / 1e12);
      System.out.printf(Locale.ROOT,
          "cuBLAS bf16 GEMM 4096^3 C=A·Bᵀ: median %.3f ms = %.0f TFLOP/s (20 runs, events)%n",
          nt, flops / (nt * 1e-3) / 1e12);
      if (lt != null) {
        double g = medianMillis(20, () -> lt.matmul(stream, Epilogue.GELU_BIAS, false, true, s, s, s, da, 0, db, 0,
            dbias, 0, h, dc, 0));
        System.out.printf(Locale.ROOT, "cuBLASLt bf16 gelu(A·Bᵀ + bias) 4096^3: median %.3f ms = %.0f TFLOP/s%n", g,
            flops / (g * 1e-3) / 1e12);
      }
      System.out.println("docs/design.md §7 anchor: 366-713 TFLOP/s for bf16 GEMMs through PyTorch on one H200");
      assertThat(nn).isPositive();
    }
  }
}
