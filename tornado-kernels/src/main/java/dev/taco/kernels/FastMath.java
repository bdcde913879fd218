package dev.taco.kernels;

/**
 * Approximate math for kernels whose results are rounded far more coarsely afterwards (the exponentials of flash
 * attention's softmax become bf16 tensor-core operands), where a GPU's special-function instruction replaces a
 * several-instruction exact routine. On the JVM exact; on the GPU within the bound given per method, so CPU and GPU may
 * differ by that much.
 */
public final class FastMath {
  private FastMath() {}

  /**
   * 2 to the power {@code x}. On the JVM the float nearest to the exact value (a result below
   * {@link Float#MIN_NORMAL} flushed to 0, as the GPU does); on the GPU one {@code ex2.approx.ftz.f32} (PTX ISA, "ex2":
   * maximum relative error 2^-22 over the whole range, about 2 ulp).
   */
  public static float exp2(float x) {
    float r = (float) Math.pow(2.0, x);
    return r < Float.MIN_NORMAL ? 0f : r;
  }
}
