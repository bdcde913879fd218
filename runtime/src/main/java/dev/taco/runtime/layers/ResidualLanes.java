package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Lanes.L;
import static dev.taco.runtime.layers.Lanes.S;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;

/**
 * {@link Residual#forwardBias} for the CPU on vector lanes ({@link Lanes}): a lane per channel, the kernel's
 * {@code a + (b + bias)}, so its bits.
 */
public final class ResidualLanes {
  private ResidualLanes() {}

  /**
   * out(rows, C) = a + (b + bias(C)), as {@link Residual#forwardBias}; {@code out} may alias {@code a} or {@code b} at
   * the same offset.
   *
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public static void forwardBias(float[] out, int outOff, float[] a, int aOff, float[] b, int bOff, float[] bias,
      int biasOff, int rows, int C) {
    Residual.checkForwardBias(out, outOff, a, aOff, b, bOff, bias, biasOff, rows, C);
    for (int r = 0; r < rows; r++) {
      int i = r * C;
      for (int c = 0; c < C; c += L) {
        VectorMask<Float> m = S.indexInRange(c, C);
        FloatVector.fromArray(S, a, aOff + i + c, m)
            .add(FloatVector.fromArray(S, b, bOff + i + c, m).add(FloatVector.fromArray(S, bias, biasOff + c, m)))
            .intoArray(out, outOff + i + c, m);
      }
    }
  }
}
