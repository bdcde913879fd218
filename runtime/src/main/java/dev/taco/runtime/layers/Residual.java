package dev.taco.runtime.layers;

import dev.taco.kernels.Kernel;
import dev.taco.kernels.Parallel;

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
