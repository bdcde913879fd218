package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Lanes.L;
import static dev.taco.runtime.layers.Lanes.S;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;

/**
 * The bias parts of {@link Matmul} for the CPU on vector lanes ({@link Lanes}), a lane per output channel: the add of
 * {@link Matmul#matmulForwardBias} (whose {@code i % OC} per element costs more than the add) and the column sums of
 * {@link Matmul#matmulBackwardBias}, each over the rows in order, so the kernels' bits. The GEMMs are
 * {@link dev.taco.kernels.Gemm}'s, through {@link Matmul#forward} and {@link Matmul#backward} without a bias.
 */
public final class MatmulLanes {
  private MatmulLanes() {}

  /**
   * out(N,OC) += bias(OC), as {@link Matmul#addBias}.
   *
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public static void addBias(float[] out, int outOff, float[] bias, int biasOff, int N, int OC) {
    Matmul.checkBias("out", out, outOff, "bias", bias, biasOff, N, OC);
    addRows(out, outOff, OC, bias, biasOff, 0, N, OC);
  }

  /**
   * dbias(OC) += the column sums of dout(N,OC), each over the N rows in order, as {@link Matmul#matmulBackwardBias}.
   *
   * @throws IllegalArgumentException if a size is not positive or a span does not fit its array
   */
  public static void backwardBias(float[] dbias, int dbiasOff, float[] dout, int doutOff, int N, int OC) {
    Matmul.checkBias("dout", dout, doutOff, "dbias", dbias, dbiasOff, N, OC);
    addRows(dbias, dbiasOff, 0, dout, doutOff, OC, N, OC);
  }

  /**
   * dst[dstOff + r·dstStride + c] += src[srcOff + r·srcStride + c] for r &lt; N in order, c &lt; OC, a lane per c: the bias
   * add with a source stride of 0 (every row gets the bias), the bias gradient with a destination stride of 0 (every
   * row goes into the one sum).
   */
  private static void addRows(float[] dst, int dstOff, int dstStride, float[] src, int srcOff, int srcStride, int N,
      int OC) {
    for (int r = 0; r < N; r++) {
      int d = dstOff + r * dstStride, s = srcOff + r * srcStride;
      for (int c = 0; c < OC; c += L) {
        VectorMask<Float> m = S.indexInRange(c, OC);
        FloatVector.fromArray(S, dst, d + c, m).add(FloatVector.fromArray(S, src, s + c, m)).intoArray(dst, d + c, m);
      }
    }
  }
}
