package dev.taco.runtime.layers;

import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The Vector API ({@code jdk.incubator.vector}) species of the CPU layers' lane-wise paths ({@link AttentionLanes},
 * {@link GeluLanes}, {@link LayerNormLanes}, {@link CrossEntropyLanes}, {@link ResidualLanes}, ...) and the lane-wise
 * functions they share: {@link #exp}, {@link #inverseSqrt}, the row softmax ({@link #max}, {@link #softmax}).
 *
 * <p>Those paths repeat their scalar kernels' float operations lane by lane, in the same order per element (a lane
 * never sums what the kernel sums in another order), so that they give the kernels' bits. Java float arithmetic is
 * IEEE 754 binary32 with round-to-nearest and no contraction, the same in a lane as in a scalar; the Vector API does
 * not fuse a {@code mul} and an {@code add} into an FMA either.
 */
final class Lanes {
  private Lanes() {}

  /** The machine's preferred float vector (16 lanes with AVX-512, 8 with AVX2). */
  static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
  /** Float lanes of {@link #S}. */
  static final int L = S.length();
  /** Double vectors of the same bit size as {@link #S}: half the lanes. */
  private static final VectorSpecies<Double> D = DoubleVector.SPECIES_PREFERRED;
  /** The lanes of {@link #S} that the second half of a float vector widened to doubles fills. */
  private static final VectorMask<Float> UPPER = S.indexInRange(0, D.length()).not();

  static {
    if (D.vectorBitSize() != S.vectorBitSize()) {
      throw new ExceptionInInitializerError("float and double preferred species differ in size: " + S + ", " + D);
    }
  }

  /**
   * {@code (float) Math.exp(x)} in every lane, the way the scalar kernels write it: each float widened to double,
   * {@link VectorOperators#EXP} in double lanes, rounded back to float. The double EXP is within 1 ulp of double
   * (the Vector API's bound, as {@link Math#exp}'s), so the two double results differ by at most ~2^-52 relative and
   * round to different floats only when exp(x) lies that close to the midpoint between two floats; on the JDK and
   * machine of this project an exhaustive comparison over every float in [-104, 89] (below, exp rounds to 0; above, to
   * Infinity) found no such x, and {@code LanesTest} samples the whole float range. A float {@code EXP} lane-wise
   * would be faster but differs from {@code (float) Math.exp} by 1 ulp for about 0.4 % of the inputs.
   */
  static FloatVector exp(FloatVector x) {
    DoubleVector lo = (DoubleVector) x.convertShape(VectorOperators.F2D, D, 0);
    DoubleVector hi = (DoubleVector) x.convertShape(VectorOperators.F2D, D, 1);
    FloatVector a = (FloatVector) lo.lanewise(VectorOperators.EXP).convertShape(VectorOperators.D2F, S, 0);
    FloatVector b = (FloatVector) hi.lanewise(VectorOperators.EXP).convertShape(VectorOperators.D2F, S, -1);
    return a.blend(b, UPPER);
  }

  /**
   * {@code (float) (1.0 / Math.sqrt(x))} in every lane (LayerNorm's rstd from the float {@code var + eps}): the same
   * double operations, each correctly rounded, so the same bits.
   */
  static FloatVector inverseSqrt(FloatVector x) {
    DoubleVector lo = (DoubleVector) x.convertShape(VectorOperators.F2D, D, 0);
    DoubleVector hi = (DoubleVector) x.convertShape(VectorOperators.F2D, D, 1);
    DoubleVector one = DoubleVector.broadcast(D, 1.0);
    FloatVector a = (FloatVector) one.div(lo.sqrt()).convertShape(VectorOperators.D2F, S, 0);
    FloatVector b = (FloatVector) one.div(hi.sqrt()).convertShape(VectorOperators.D2F, S, -1);
    return a.blend(b, UPPER);
  }

  /**
   * The maximum of {@code scale · x[off + i]} over i &lt; n (-Infinity for n = 0), the first pass of a softmax. Order-free
   * as {@link Math#max} is: a NaN anywhere gives NaN, where a kernel's {@code if (s > max)} skips it; either way the
   * softmax of that row is all NaN (the kernel's through a NaN sum), and between -0 and +0 the exp of the difference is
   * 1 either way.
   */
  static float max(float[] x, int off, int n, float scale) {
    FloatVector mv = FloatVector.broadcast(S, Float.NEGATIVE_INFINITY);
    for (int i = 0; i < n; i += L) {
      VectorMask<Float> m = S.indexInRange(i, n);
      mv = mv.lanewise(VectorOperators.MAX, FloatVector.fromArray(S, x, off + i, m).mul(scale), m);
    }
    return mv.reduceLanes(VectorOperators.MAX);
  }

  /**
   * dst[dstOff + i] = exp(scale·src[srcOff + i] − max) / sum for i &lt; n, the softmax of the kernels (attention's
   * scores, the cross-entropy's logits with scale 1, {@code x · 1 == x}); returns the sum, added in the kernels'
   * sequential order (a scalar loop: a lane-wise sum would reorder it). {@code dst} may be {@code src} at the same
   * offset.
   */
  static float softmax(float[] dst, int dstOff, float[] src, int srcOff, int n, float scale, float max) {
    for (int i = 0; i < n; i += L) {
      VectorMask<Float> m = S.indexInRange(i, n);
      exp(FloatVector.fromArray(S, src, srcOff + i, m).mul(scale).sub(max)).intoArray(dst, dstOff + i, m);
    }
    float sum = 0f;
    for (int i = 0; i < n; i++) {
      sum += dst[dstOff + i];
    }
    float inv = 1f / sum;
    for (int i = 0; i < n; i += L) {
      VectorMask<Float> m = S.indexInRange(i, n);
      FloatVector.fromArray(S, dst, dstOff + i, m).mul(inv).intoArray(dst, dstOff + i, m);
    }
    return sum;
  }

  /** {@code n} rounded up to a multiple of {@link #L}. */
  static int roundUp(int n) {
    return (n + L - 1) / L * L;
  }
}
