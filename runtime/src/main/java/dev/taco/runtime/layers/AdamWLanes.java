package dev.taco.runtime.layers;

import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link AdamW#update} for the CPU on vector lanes (the Vector API, {@code jdk.incubator.vector}): a lane per
 * parameter, the kernel's float operations in its order, so its bits (the float square root of a lane is correctly
 * rounded, as {@code (float) Math.sqrt} of a float is). The last {@code n mod lanes} parameters go through the scalar
 * kernel {@link AdamW#adamwUpdate}.
 */
public final class AdamWLanes {
  private AdamWLanes() {}

  private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
  /** Bytes of the decay switches, as many lanes as {@link #S}. */
  private static final VectorSpecies<Byte> BYTES = VectorSpecies.of(byte.class, VectorShape.forBitSize(S.length() * 8));

  /**
   * One update of {@code params[0..n)} in place, as {@link AdamW#update} (arguments there).
   *
   * @throws IllegalArgumentException if {@code n} is negative, an array is shorter than {@code n}, or {@code step < 1}
   */
  public static void update(float[] params, float[] grads, float[] m, float[] v, byte[] decay, int n, float lr,
      float beta1, float beta2, float eps, float weightDecay, float gradScale, int step) {
    AdamW.check(params, grads, m, v, decay, n, step);
    float c1 = AdamW.biasCorrection(beta1, step), c2 = AdamW.biasCorrection(beta2, step);
    float keep1 = 1f - beta1, keep2 = 1f - beta2;
    int i = 0;
    for (int end = S.loopBound(n); i < end; i += S.length()) {
      FloatVector g = FloatVector.fromArray(S, grads, i).mul(gradScale);
      FloatVector mi = FloatVector.fromArray(S, m, i).mul(beta1).add(g.mul(keep1));
      FloatVector vi = FloatVector.fromArray(S, v, i).mul(beta2).add(g.mul(keep2).mul(g));
      mi.intoArray(m, i);
      vi.intoArray(v, i);
      FloatVector p = FloatVector.fromArray(S, params, i);
      FloatVector wd = ((FloatVector) ByteVector.fromArray(BYTES, decay, i).convertShape(VectorOperators.B2F, S, 0))
          .mul(weightDecay);
      FloatVector step1 = mi.div(c1).div(vi.div(c2).sqrt().add(eps)).add(wd.mul(p));
      p.sub(step1.mul(lr)).intoArray(params, i);
    }
    if (i < n) {
      AdamW.adamwUpdate(params, i, grads, i, m, i, v, i, decay, i, n - i, lr, beta1, beta2, eps, weightDecay,
          gradScale, c1, c2);
    }
  }
}
