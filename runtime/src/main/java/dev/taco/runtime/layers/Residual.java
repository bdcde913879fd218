package dev.taco.runtime.layers;

import dev.taco.kernels.Kernel;
import dev.taco.kernels.Parallel;
import dev.taco.kernels.Vec16;

/**
 * The residual connection of a pre-LN block: {@code out = a + b}.
 *
 * <p>Shapes: {@code a}, {@code b}, {@code out} are (N), any flattening of (B,T,C). The gradient of a
 * sum passes unchanged to both addends. Reference: He et al., "Deep Residual Learning for Image
 * Recognition", 2016, eq. 1.
 */
public final class Residual {
  private Residual() {}

  /** out(N) = a(N) + b(N). Overwrites {@code out}, which may alias {@code a} or {@code b} at the same offset. */
  public static void forward(float[] out, int outOff, float[] a, int aOff, float[] b, int bOff, int N) {
    Check.positive("N", N);
    Check.span("out", out, outOff, N);
    Check.span("a", a, aOff, N);
    Check.span("b", b, bOff, N);
    residualForward(out, outOff, a, aOff, b, bOff, N);
  }

  /** Kernel of {@link #forward}, one iteration per element. No checks. */
  @Kernel
  public static void residualForward(float[] out, int outOff, float[] a, int aOff, float[] b, int bOff, int N) {
    for (@Parallel int i = 0; i < N; i++) {
      out[outOff + i] = a[aOff + i] + b[bOff + i];
    }
  }

  /**
   * out(rows, C) = a + (b + bias): the residual add of a row-parallel linear's output b, whose bias is added once
   * after its all-reduce (Megatron-LM), in one pass; the same float operations as {@link Matmul#addBias} on b followed
   * by {@link #forward}, so the same bits; b is left as it was.
   *
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public static void forwardBias(float[] out, int outOff, float[] a, int aOff, float[] b, int bOff, float[] bias,
      int biasOff, int rows, int C) {
    checkForwardBias(out, outOff, a, aOff, b, bOff, bias, biasOff, rows, C);
    residualBiasForward(out, outOff, a, aOff, b, bOff, bias, biasOff, rows, C);
  }

  /** The checks of {@link #forwardBias} (and of {@link ResidualLanes#forwardBias}). */
  static void checkForwardBias(float[] out, int outOff, float[] a, int aOff, float[] b, int bOff, float[] bias,
      int biasOff, int rows, int C) {
    Check.positive("rows", rows);
    Check.positive("C", C);
    long n = (long) rows * C;
    if (n > Integer.MAX_VALUE) throw new IllegalArgumentException(rows + " x " + C + " elements is too many");
    Check.span("out", out, outOff, (int) n);
    Check.span("a", a, aOff, (int) n);
    Check.span("b", b, bOff, (int) n);
    Check.span("bias", bias, biasOff, C);
  }

  /** Kernel of {@link #forwardBias}, one iteration per element. No checks. */
  @Kernel
  public static void residualBiasForward(float[] out, int outOff, float[] a, int aOff, float[] b, int bOff,
      float[] bias, int biasOff, int rows, int C) {
    for (@Parallel int i = 0; i < rows * C; i++) {
      out[outOff + i] = a[aOff + i] + (b[bOff + i] + bias[biasOff + i % C]);
    }
  }

  /**
   * Kernel: {@link #residualBiasForward} four elements per iteration with 16-byte loads and stores (the GPU's form; the
   * same float operations, so the same bits): {@code groups} = rows·C / 4, C a multiple of 4, offsets multiples of 4.
   * No checks.
   */
  @Kernel
  public static void residualBiasForward4(float[] out, int outOff, float[] a, int aOff, float[] b, int bOff,
      float[] bias, int biasOff, int C, int groups) {
    for (@Parallel int g = 0; g < groups; g++) {
      float[] x = new float[4];
      float[] y = new float[4];
      float[] z = new float[4];
      Vec16.loadFloat4(a, aOff + 4 * g, x);
      Vec16.loadFloat4(b, bOff + 4 * g, y);
      Vec16.loadFloat4(bias, biasOff + 4 * g % C, z);
      for (int k = 0; k < 4; k++) {
        x[k] = x[k] + (y[k] + z[k]);
      }
      Vec16.storeFloat4(out, outOff + 4 * g, x);
    }
  }

  /** da(N) += dout(N), db(N) += dout(N). {@code da} and {@code db} must not be the same span. */
  public static void backward(float[] da, int daOff, float[] db, int dbOff, float[] dout, int doutOff, int N) {
    Check.positive("N", N);
    Check.span("da", da, daOff, N);
    Check.span("db", db, dbOff, N);
    Check.span("dout", dout, doutOff, N);
    residualBackward(da, daOff, db, dbOff, dout, doutOff, N);
  }

  /** Kernel of {@link #backward}, one iteration per element. No checks. */
  @Kernel
  public static void residualBackward(float[] da, int daOff, float[] db, int dbOff, float[] dout, int doutOff, int N) {
    for (@Parallel int i = 0; i < N; i++) {
      float d = dout[doutOff + i];
      da[daOff + i] += d;
      db[dbOff + i] += d;
    }
  }
}
