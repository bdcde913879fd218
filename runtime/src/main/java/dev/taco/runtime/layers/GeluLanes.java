package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Gelu.K;
import static dev.taco.runtime.layers.Gelu.SQRT_2_OVER_PI;
import static dev.taco.runtime.layers.Lanes.L;
import static dev.taco.runtime.layers.Lanes.S;

import jdk.incubator.vector.FloatVector;

/**
 * {@link Gelu}'s forward and backward for the CPU on vector lanes ({@link Lanes}): the kernels' float operations in
 * their order, lane by lane, so their bits; the tanh is the kernels' {@code 1 − 2/(exp(2u) + 1)} with
 * {@link Lanes#exp} (the bits of {@code (float) Math.exp}). The last {@code N mod L} elements go through the scalar
 * kernel itself. Shapes and formulas: {@link Gelu}.
 */
public final class GeluLanes {
  private GeluLanes() {}

  /**
   * out(N) = gelu(inp(N)), as {@link Gelu#forward}; {@code out} may alias {@code inp} at the same offset.
   *
   * @throws IllegalArgumentException if N is not positive or a span does not fit its array
   */
  public static void forward(float[] out, int outOff, float[] inp, int inpOff, int N) {
    Gelu.checkForward(out, outOff, inp, inpOff, N);
    int i = 0;
    for (int end = S.loopBound(N); i < end; i += L) {
      FloatVector x = FloatVector.fromArray(S, inp, inpOff + i);
      x.mul(0.5f).mul(tanh(u(x)).add(1f)).intoArray(out, outOff + i);
    }
    if (i < N) {
      Gelu.geluForward(out, outOff + i, inp, inpOff + i, N - i);
    }
  }

  /**
   * dinp(N) += dout · gelu'(inp), as {@link Gelu#backward}.
   *
   * @throws IllegalArgumentException if N is not positive or a span does not fit its array
   */
  public static void backward(float[] dinp, int dinpOff, float[] dout, int doutOff, float[] inp, int inpOff, int N) {
    Gelu.checkBackward(dinp, dinpOff, dout, doutOff, inp, inpOff, N);
    int i = 0;
    for (int end = S.loopBound(N); i < end; i += L) {
      FloatVector x = FloatVector.fromArray(S, inp, inpOff + i);
      FloatVector th = tanh(u(x));
      FloatVector du = x.mul(3f * K).mul(x).add(1f).mul(SQRT_2_OVER_PI);
      FloatVector one = FloatVector.broadcast(S, 1f);
      FloatVector grad = th.add(1f).mul(0.5f).add(x.mul(0.5f).mul(one.sub(th.mul(th))).mul(du));
      FloatVector.fromArray(S, dinp, dinpOff + i)
          .add(grad.mul(FloatVector.fromArray(S, dout, doutOff + i)))
          .intoArray(dinp, dinpOff + i);
    }
    if (i < N) {
      Gelu.geluBackward(dinp, dinpOff + i, dout, doutOff + i, inp, inpOff + i, N - i);
    }
  }

  /** sqrt(2/π)·(x + 0.044715·x³), with the kernels' rounding order {@code ((K·x)·x)·x}. */
  private static FloatVector u(FloatVector x) {
    return x.mul(K).mul(x).mul(x).add(x).mul(SQRT_2_OVER_PI);
  }

  /** {@link Gelu#tanh}: {@code 1 − 2/(exp(2u) + 1)}. */
  private static FloatVector tanh(FloatVector u) {
    return FloatVector.broadcast(S, 1f).sub(FloatVector.broadcast(S, 2f).div(Lanes.exp(u.mul(2f)).add(1f)));
  }
}
