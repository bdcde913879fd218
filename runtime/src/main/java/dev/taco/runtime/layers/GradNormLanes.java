package dev.taco.runtime.layers;

import java.util.Arrays;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link GradNorm#squaredNorm} for the CPU on vector lanes: a double lane per partial sum. The kernel's partial p adds
 * x[p], x[p + PARTS], x[p + 2·PARTS], ... in that order; here the array is read once from start to end, PARTS elements
 * at a time, each element into its partial, so every partial adds the same terms in the same order (the bits of the
 * kernel), while the kernel's strided walk (stride 16 KiB) is replaced by a sequential one. The square of a float is
 * exact in double. Not thread-safe: one instance per thread (it keeps its partials).
 */
public final class GradNormLanes {
  /** Double lanes of the machine's preferred size. */
  private static final VectorSpecies<Double> D = DoubleVector.SPECIES_PREFERRED;
  /** Floats of half that size: one lane per double lane. */
  private static final VectorSpecies<Float> F = VectorSpecies.of(float.class,
      jdk.incubator.vector.VectorShape.forBitSize(D.vectorBitSize() / 2));

  private final double[] partial = new double[GradNorm.PARTS];

  /**
   * The sum of {@code (double) x[i]²} over {@code [0, n)} from {@code xOff} without the elements flagged in
   * {@code skip} when {@code useSkip}, as {@link GradNorm#squaredNorm}.
   *
   * @param skip may be null when {@code useSkip} is false
   * @throws IllegalArgumentException as {@link GradNorm#squaredNorm}
   */
  public double squaredNorm(float[] x, int xOff, boolean[] skip, int skipOff, boolean useSkip, int n) {
    GradNorm.check(x, xOff, skip, skipOff, useSkip, n);
    Arrays.fill(partial, 0.0);
    for (int base = 0; base < n; base += GradNorm.PARTS) {
      for (int p = 0; p < GradNorm.PARTS && base + p < n; p += D.length()) {
        int i = base + p;
        VectorMask<Double> m = D.indexInRange(i, n);
        if (useSkip) {
          m = m.andNot(flags(skip, skipOff + i, Math.min(D.length(), n - i)));
        }
        DoubleVector v = (DoubleVector) FloatVector.fromArray(F, x, xOff + i, m.cast(F))
            .convertShape(VectorOperators.F2D, D, 0);
        DoubleVector.fromArray(D, partial, p).add(v.mul(v), m).intoArray(partial, p);
      }
    }
    return GradNorm.total(partial);
  }

  /** The {@code count <= } lanes flags from {@code skip[off]} as a mask (false past count). */
  private static VectorMask<Double> flags(boolean[] skip, int off, int count) {
    if (count == D.length()) {
      return VectorMask.fromArray(D, skip, off);
    }
    long bits = 0;
    for (int k = 0; k < count; k++) {
      bits |= skip[off + k] ? 1L << k : 0;
    }
    return VectorMask.fromLong(D, bits);
  }
}
