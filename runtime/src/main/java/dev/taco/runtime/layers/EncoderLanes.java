package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Lanes.L;
import static dev.taco.runtime.layers.Lanes.S;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;

/**
 * {@link Encoder}'s forward and backward for the CPU on vector lanes ({@link Lanes}), a lane per channel, the
 * kernels' bits: the forward adds {@code wte[token] + wpe[t]}; the backward adds each position's dout row into its
 * token's dwte row and its position's dwpe row, the positions in order, so every element of dwte and dwpe sums the same
 * terms in the same order as {@link Encoder#encoderBackwardWte} (which scans the ids once per vocabulary row) and
 * {@link Encoder#encoderBackwardWpe} (b = 0..B-1). Shapes: {@link Encoder}.
 */
public final class EncoderLanes {
  private EncoderLanes() {}

  /**
   * out(B,T,C) = wte[inp[b,t]] + wpe[t], as {@link Encoder#forward}.
   *
   * @throws IllegalArgumentException if a size is not positive, a span does not fit its array or an id is not in
   *     [0,V)
   */
  public static void forward(float[] out, int outOff, int[] inp, int inpOff, float[] wte, int wteOff, float[] wpe,
      int wpeOff, int B, int T, int C, int V) {
    Encoder.checkForward(out, outOff, inp, inpOff, wte, wteOff, wpe, wpeOff, B, T, C, V);
    for (int bt = 0; bt < B * T; bt++) {
      int e = wteOff + inp[inpOff + bt] * C, p = wpeOff + (bt % T) * C, o = outOff + bt * C;
      for (int c = 0; c < C; c += L) {
        VectorMask<Float> m = S.indexInRange(c, C);
        FloatVector.fromArray(S, wte, e + c, m).add(FloatVector.fromArray(S, wpe, p + c, m)).intoArray(out, o + c, m);
      }
    }
  }

  /**
   * dwte(V,C) += dout rows by token, dwpe(T,C) += dout summed over the batch, as {@link Encoder#backward}.
   *
   * @throws IllegalArgumentException if a size is not positive, a span does not fit its array or an id is not in
   *     [0,V)
   */
  public static void backward(float[] dwte, int dwteOff, float[] dwpe, int dwpeOff, float[] dout, int doutOff,
      int[] inp, int inpOff, int B, int T, int C, int V) {
    Encoder.checkBackward(dwte, dwteOff, dwpe, dwpeOff, dout, doutOff, inp, inpOff, B, T, C, V);
    for (int bt = 0; bt < B * T; bt++) {
      int e = dwteOff + inp[inpOff + bt] * C, p = dwpeOff + (bt % T) * C, d = doutOff + bt * C;
      for (int c = 0; c < C; c += L) {
        VectorMask<Float> m = S.indexInRange(c, C);
        FloatVector g = FloatVector.fromArray(S, dout, d + c, m);
        FloatVector.fromArray(S, dwte, e + c, m).add(g).intoArray(dwte, e + c, m);
        FloatVector.fromArray(S, dwpe, p + c, m).add(g).intoArray(dwpe, p + c, m);
      }
    }
  }
}
