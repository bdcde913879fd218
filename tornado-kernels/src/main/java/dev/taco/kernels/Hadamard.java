package dev.taco.kernels;

/**
 * In-place orthonormal fast Walsh-Hadamard transform (docs/design.md §3.2).
 *
 * <p>The Sylvester-ordered Hadamard matrix H_n (n a power of two, H_1 = [1], H_2n = [[H_n, H_n], [H_n, -H_n]])
 * scaled by 1/sqrt(n) is symmetric and orthogonal, so the transform is its own inverse: H(H(x)) = x up to
 * float rounding (exactly, when n is a power of four and no rounding occurs in the sums). O(n log n) additions.
 */
public final class Hadamard {
  private Hadamard() {}

  /**
   * Transforms {@code a[off .. off+n)} in place: {@code a <- (1/sqrt(n)) H_n a}.
   *
   * @param n group size, a power of two &ge; 1 (not checked: callers validate it)
   */
  public static void fwht(float[] a, int off, int n) {
    for (int h = 1; h < n; h <<= 1) {
      for (int i = off; i < off + n; i += h << 1) {
        for (int j = i; j < i + h; j++) {
          float u = a[j];
          float v = a[j + h];
          a[j] = u + v;
          a[j + h] = u - v;
        }
      }
    }
    float s = scale(n);
    for (int i = off; i < off + n; i++) {
      a[i] *= s;
    }
  }

  /** The normalisation {@code (float) (1 / sqrt(n))} applied after the butterflies (exact for even powers of two). */
  public static float scale(int n) {
    return (float) (1.0 / Math.sqrt(n));
  }
}
